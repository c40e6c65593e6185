# idempotency_key: the key taken from any nginx variable instead of a header,
# so at-least-once deliveries that carry their own id (webhooks, a request id
# in the query string) are executed once.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a webhook delivered twice with the same delivery id is executed once
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /hooks/ {
    idempotency     on;
    idempotency_key $http_x_github_delivery;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /hooks/github\n{\"action\":\"opened\"}", "POST /hooks/github\n{\"action\":\"opened\"}",
 "POST /hooks/github\n{\"action\":\"opened\"}"]
--- more_headers eval
["X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
 "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
 "X-GitHub-Delivery: 9b2d7e4a-cc78-11e3-81ab-4c9367dc0958"]
--- error_code eval
[201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 2"]


=== TEST 2: a request id in the query string; the Idempotency-Key header is then ignored
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency     on;
    idempotency_key $arg_request_id;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /orders?request_id=r-1\nx", "POST /orders?request_id=r-1\nx"]
--- more_headers eval
["Idempotency-Key: a", "Idempotency-Key: b"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1"]


=== TEST 3: an empty value is no key: passed through, or 400 when required
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /optional/ {
    idempotency     on;
    idempotency_key $arg_request_id;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /required/ {
    idempotency          on;
    idempotency_key      $arg_request_id;
    idempotency_required on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /optional/x\nx", "POST /required/x\nx"]
--- error_code eval
[201, 400]
--- response_headers eval
["X-Idempotency-Status: missing", "X-Idempotency-Status: missing\nContent-Type: application/problem+json"]


=== TEST 4: the value follows the key rules: one with a space is invalid
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency     on;
    idempotency_key "$arg_a $arg_b";
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /orders?a=1&b=2
x
--- error_code: 400
--- response_headers
X-Idempotency-Status: invalid
