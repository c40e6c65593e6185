# What happens to the key when the upstream fails: a 5xx is not stored and
# the key is released so a retry runs again (unless idempotency_store_errors
# is on); a request that never reached the upstream always releases; a 4xx
# is a real answer and is stored (docs/design.md#not-executed).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: an upstream 500 is not stored: the key is released and the retry executes again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /err/1?status=500\nx", "POST /err/1?status=500\nx"]
--- more_headers
Idempotency-Key: err-500
--- error_code eval
[500, 500]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 2\n!Idempotent-Replayed"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":2,/]
--- no_error_log
[error]


=== TEST 2: idempotency_store_errors on: the 500 is stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_store_errors on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /err/2?status=500\nx", "POST /err/2?status=500\nx"]
--- more_headers
Idempotency-Key: err-500-stored
--- error_code eval
[500, 500]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 3: an upstream that cannot be reached: 502, the key is released for the retry
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
map $http_x_route $payments {
    default  backend;
    dead     127.0.0.1:$TEST_NGINX_RAND_PORT_1;
}
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://$payments;
}
--- request eval
["POST /err/3\nx", "POST /err/3\nx"]
--- more_headers eval
["Idempotency-Key: err-unreachable\nX-Route: dead", "Idempotency-Key: err-unreachable"]
--- error_code eval
[502, 201]
--- response_headers eval
["X-Idempotency-Status: released\n!X-Upstream-Execution",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!Idempotent-Replayed"]
--- response_body_like eval
[qr/502 Bad Gateway/, qr/"execution":1,/]


=== TEST 4: an upstream 4xx is an answer: stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /err/4?status=409\nx", "POST /err/4?status=409\nx"]
--- more_headers
Idempotency-Key: err-409
--- error_code eval
[409, 409]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/]
--- no_error_log
[error]
