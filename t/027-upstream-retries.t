# nginx's retries of the next upstream peer count as one execution
# (docs/design.md#redirects-followed): once any peer may have received the request,
# the key is never released — the retry gets the stored answer or 410, never
# a second execution. An answer nginx makes up after the upstream was never
# reached (an error_page fallback) is not stored: the key is released.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

# A peer that reads the request and never answers.
$ENV{TEST_NGINX_SILENT_PORT} = IdempotencyTest::start_fake_redis('');

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: the first peer got the request and timed out, the next refused: 502, then 410, one execution
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream two_peers {
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
}
--- config
location /v1/ {
    idempotency on;
    add_header X-Status $idempotency_status always;
    proxy_next_upstream error timeout non_idempotent;
    proxy_read_timeout 300ms;
    proxy_pass http://two_peers;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /v1/retry/1?sleep=1\nx", "POST /v1/retry/1?sleep=1\nx", "GET /_count/v1/retry/1"]
--- more_headers eval
["Idempotency-Key: retry-1", "Idempotency-Key: retry-1", ""]
--- error_code eval
[502, 410, 200]
--- response_headers eval
["X-Status: new", "X-Status: unreplayable\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/502 Bad Gateway/, qr/problem:response-not-replayable"/, qr/\A1\z/]


=== TEST 2: a silent peer, then one that answers: the answer is stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream silent_then_live {
    server 127.0.0.1:$TEST_NGINX_SILENT_PORT;
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT;
}
--- config
location /v1/ {
    idempotency on;
    proxy_next_upstream error timeout non_idempotent;
    proxy_read_timeout 300ms;
    proxy_pass http://silent_then_live;
}
--- request eval
["POST /v1/retry/2\nx", "POST /v1/retry/2\nx"]
--- more_headers
Idempotency-Key: retry-2
--- error_code eval
[201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 3: a silent peer, then one that answers 5xx: not released, 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream silent_then_live {
    server 127.0.0.1:$TEST_NGINX_SILENT_PORT;
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT;
}
--- config
location /v1/ {
    idempotency on;
    proxy_next_upstream error timeout non_idempotent;
    proxy_read_timeout 300ms;
    proxy_pass http://silent_then_live;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /v1/retry/3?status=503\nx", "POST /v1/retry/3?status=503\nx", "GET /_count/v1/retry/3"]
--- more_headers eval
["Idempotency-Key: retry-3", "Idempotency-Key: retry-3", ""]
--- error_code eval
[503, 410, 200]
--- response_body_like eval
[qr/"execution":1,/, qr/problem:response-not-replayable"/, qr/\A1\z/]


=== TEST 4: every peer refused: error_page's fallback answer is not stored, the key is released
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream down {
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
}
--- config
location /v1/ {
    idempotency on;
    add_header X-Status $idempotency_status always;
    error_page 502 =200 @fallback;
    proxy_pass http://down;
}
location @fallback {
    add_header X-Status $idempotency_status always;
    return 200 "fallback\n";
}
--- request eval
["POST /v1/retry/4\nx", "POST /v1/retry/4\nx"]
--- more_headers
Idempotency-Key: retry-4
--- error_code eval
[200, 200]
--- response_headers eval
["X-Status: released\n!Idempotent-Replayed", "X-Status: released\n!Idempotent-Replayed"]
--- response_body eval
["fallback\n", "fallback\n"]
--- error_log
releasing
the request never reached the upstream


=== TEST 5: ... and nothing is left under its key
--- init
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('retry-4')), undef,
               'TEST 5: the fallback was not stored and the claim was released');
--- config
location / {
    return 204;
}
--- request
GET /
--- error_code: 204


=== TEST 6: the peer got the request and timed out: error_page's fallback is not stored, 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency on;
    proxy_read_timeout 300ms;
    error_page 504 =200 @fallback;
    proxy_pass http://backend;
}
location @fallback {
    return 200 "fallback\n";
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /v1/retry/6?sleep=1\nx", "POST /v1/retry/6?sleep=1\nx", "GET /_count/v1/retry/6"]
--- more_headers eval
["Idempotency-Key: retry-6", "Idempotency-Key: retry-6", ""]
--- error_code eval
[200, 410, 200]
--- response_body_like eval
[qr/\Afallback\n\z/, qr/problem:response-not-replayable"/, qr/\A1\z/]


=== TEST 7: every peer that got the request answered 5xx: the key is released, the retry runs again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
upstream twice {
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT max_fails=0;
    server 127.0.0.1:$TEST_NGINX_UPSTREAM_PORT max_fails=0;
}
--- config
location /v1/ {
    idempotency on;
    proxy_next_upstream error timeout http_502 non_idempotent;
    proxy_pass http://twice;
}
--- request eval
["POST /v1/retry/7?status=502\nx", "POST /v1/retry/7?status=502\nx"]
--- more_headers
Idempotency-Key: retry-7
--- error_code eval
[502, 502]
--- response_headers eval
["X-Upstream-Execution: 2\n!Idempotent-Replayed", "X-Upstream-Execution: 4\n!Idempotent-Replayed"]
--- error_log
the upstream answered 5xx
