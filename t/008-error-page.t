# An API with its own error shape replaces the module's problem+json answers
# the nginx way, with error_page: the status is kept, $idempotency_status is
# available in the error page, and so is Retry-After
# (docs/design.md#problem-answers).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a 422 answered by a named-location error page, with $idempotency_status
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    error_page 409 422 @idempotency_error;
    proxy_pass http://backend;
}
location @idempotency_error {
    default_type application/json;
    return 200 '{"error":{"type":"idempotency_error","status":"$idempotency_status"}}';
}
--- request eval
["POST /ep/1\namount=100", "POST /ep/1\namount=200"]
--- more_headers
Idempotency-Key: ep-1
--- error_code eval
[201, 422]
--- response_headers eval
["X-Upstream-Execution: 1", "Content-Type: application/json\n!X-Upstream-Execution"]
--- response_body_like eval
[qr/"execution":1,/, qr/\A\{"error":\{"type":"idempotency_error","status":"mismatch"\}\}\z/]
--- no_error_log
[error]


=== TEST 2: a 409 answered by the error page keeps its Retry-After
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    error_page 409 422 @idempotency_error;
    proxy_pass http://backend;
}
location @idempotency_error {
    default_type application/json;
    return 200 '{"error":{"type":"idempotency_error","status":"$idempotency_status"}}';
}
--- init
$main::original = IdempotencyTest::send_request(
    "POST /ep/2?sleep=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Idempotency-Key: ep-2\r\nContent-Length: 1\r\n\r\nx");
IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count('/ep/2') == 1 }, 5);
--- request
POST /ep/2?sleep=1
x
--- more_headers
Idempotency-Key: ep-2
--- error_code: 409
--- response_headers_like
Content-Type: application/json
Retry-After: [1-9][0-9]*
--- response_body: {"error":{"type":"idempotency_error","status":"conflict"}}
--- no_error_log
[error]


=== TEST 3: the replay of a finished request does not go through the error page
--- init
IdempotencyTest::wait_until(sub {
    (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('ep-2')) // '') eq 'response'
}, 10);
close $main::original if $main::original;
--- request
POST /ep/2?sleep=1
x
--- more_headers
Idempotency-Key: ep-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- response_body_like: "execution":1,
--- no_error_log
[error]


=== TEST 4: a URI error page answers 400 and 503, keeping the status and Retry-After
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
error_page 400 503 /idempotency-error;
location / {
    idempotency on;
    proxy_pass http://backend;
}
location /down/ {
    idempotency on;
    idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    proxy_pass http://backend;
}
location = /idempotency-error {
    internal;
    default_type application/json;
    return 200 '{"error":{"type":"idempotency_error","status":"$idempotency_status"}}';
}
--- request eval
["POST /ep/4\nx", "POST /down/4\nx"]
--- more_headers eval
["Idempotency-Key: two words", "Idempotency-Key: ep-4"]
--- error_code eval
[400, 503]
--- response_headers_like eval
["Content-Type: application/json", "Content-Type: application/json\nRetry-After: [1-9][0-9]*"]
--- response_body eval
['{"error":{"type":"idempotency_error","status":"invalid"}}',
 '{"error":{"type":"idempotency_error","status":"unavailable"}}']
