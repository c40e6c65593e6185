# A 4xx that says the request was not executed (idempotency_release_statuses,
# by default 401 403 408 425 429) is not stored: the key is released, like
# for a 5xx, and the retry executes again. Any other 4xx is an answer and is
# stored. nginx -t refuses a status outside 400-499.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: an upstream 429 is released: the retry executes again and gets the new answer
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
map $http_x_answer $answer {
    default  "";
    429      "?status=429";
}
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend$uri$answer;
}
--- request eval
["POST /rel/1\nx", "POST /rel/1\nx", "POST /rel/1\nx"]
--- more_headers eval
["Idempotency-Key: rel-429\nX-Answer: 429", "Idempotency-Key: rel-429", "Idempotency-Key: rel-429"]
--- error_code eval
[429, 201, 201]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 2\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 2\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 1b: the log says why the key was released
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /rel/1b?status=429
x
--- more_headers
Idempotency-Key: rel-429-log
--- error_code: 429
--- error_log eval
qr/\[info\] .*idempotency: releasing "idem:[0-9a-f]{64}": the upstream answered 429: not executed/
--- no_error_log
[error]


=== TEST 2: 408, 425, 401 and 403 are released by default too
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rel/408?status=408\nx", "POST /rel/408?status=408\nx",
 "POST /rel/425?status=425\nx", "POST /rel/425?status=425\nx",
 "POST /rel/401?status=401\nx", "POST /rel/401?status=401\nx",
 "POST /rel/403?status=403\nx", "POST /rel/403?status=403\nx"]
--- more_headers eval
["Idempotency-Key: rel-408", "Idempotency-Key: rel-408",
 "Idempotency-Key: rel-425", "Idempotency-Key: rel-425",
 "Idempotency-Key: rel-401", "Idempotency-Key: rel-401",
 "Idempotency-Key: rel-403", "Idempotency-Key: rel-403"]
--- error_code eval
[408, 408, 425, 425, 401, 401, 403, 403]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2"]
--- error_log eval
qr/the upstream answered (408|425|401|403): not executed/
--- no_error_log
[error]


=== TEST 3: a 404, a 409 and a 400 from the upstream are answers: stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rel/404?status=404\nx", "POST /rel/404?status=404\nx",
 "POST /rel/409?status=409\nx", "POST /rel/409?status=409\nx",
 "POST /rel/400?status=400\nx", "POST /rel/400?status=400\nx"]
--- more_headers eval
["Idempotency-Key: rel-404", "Idempotency-Key: rel-404",
 "Idempotency-Key: rel-409", "Idempotency-Key: rel-409",
 "Idempotency-Key: rel-400", "Idempotency-Key: rel-400"]
--- error_code eval
[404, 404, 409, 409, 400, 400]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]
releasing


=== TEST 4: a configured list replaces the default: 409 released, 429 stored
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_release_statuses 409 423;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rel/4-409?status=409\nx", "POST /rel/4-409?status=409\nx",
 "POST /rel/4-429?status=429\nx", "POST /rel/4-429?status=429\nx"]
--- more_headers eval
["Idempotency-Key: rel-4-409", "Idempotency-Key: rel-4-409",
 "Idempotency-Key: rel-4-429", "Idempotency-Key: rel-4-429"]
--- error_code eval
[409, 409, 429, 429]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 5: off, set in the http block and inherited, stores a 429
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_release_statuses off;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rel/5?status=429\nx", "POST /rel/5?status=429\nx"]
--- more_headers
Idempotency-Key: rel-off
--- error_code eval
[429, 429]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]
releasing


=== TEST 6: proxy_next_upstream http_429: every peer said 429, nothing executed: released
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream two_peers {
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT max_fails=0;
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT max_fails=0;
}
--- config
location / {
    idempotency on;
    proxy_next_upstream error timeout http_429 non_idempotent;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://two_peers;
}
--- request eval
["POST /rel/6?status=429\nx", "POST /rel/6?status=429\nx"]
--- more_headers
Idempotency-Key: rel-next-429
--- error_code eval
[429, 429]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 4"]
--- error_log
the upstream answered 429: not executed
--- no_error_log
[error]
cannot be replayed


=== TEST 7: a 5xx status is refused by nginx -t, naming the directive
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_release_statuses 429 503;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"503".*"idempotency_release_statuses"/


=== TEST 8: a status below 400 is refused
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency_release_statuses 399;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"399".*"idempotency_release_statuses"/


=== TEST 9: a word that is not a status is refused
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency_release_statuses 429 too_many;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"too_many".*"idempotency_release_statuses"/


=== TEST 10: off with statuses is refused
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency_release_statuses off 429;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"off".*"idempotency_release_statuses"/


=== TEST 11: the directive twice in one block is refused
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency_release_statuses 429;
    idempotency_release_statuses 408;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_release_statuses" directive is duplicate/
