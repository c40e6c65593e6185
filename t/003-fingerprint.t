# The same key with a different request is refused with 422: the fingerprint
# covers the method, the raw URI (path and query) and every byte of the body,
# in memory, in a temporary file or de-chunked (SPEC rule 6).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: same key, different body: 422 problem; the first response still replays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /fp/1\namount=100", "POST /fp/1\namount=200", "POST /fp/1\namount=100"]
--- more_headers
Idempotency-Key: fp-body
--- error_code eval
[201, 422, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json\n!X-Upstream-Execution",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- raw_response_headers_like eval
[qr/\AHTTP\/1\.1 201 Created\r\n/, qr/\AHTTP\/1\.1 422 Unprocessable Content\r\n/, qr/\AHTTP\/1\.1 201 Created\r\n/]
--- response_body_like eval
[qr/"execution":1,/,
 qr/\A\{(?=.*"status":422[,}])(?=.*"type":")(?=.*"title":")(?=.*"detail":").*\}\z/s,
 qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 2: same key, different query string: 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /fp/2?currency=EUR\nx", "POST /fp/2?currency=USD\nx", "GET /_count/fp/2"]
--- more_headers
Idempotency-Key: fp-query
--- error_code eval
[201, 422, 200]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/"status":422[,}]/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 3: same key, different method (PATCH after POST): 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /fp/3\nx", "PATCH /fp/3\nx", "GET /_count/fp/3"]
--- more_headers
Idempotency-Key: fp-method
--- error_code eval
[201, 422, 200]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/"status":422[,}]/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 4: a body buffered to a temporary file is hashed to its last byte
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
client_body_buffer_size 8k;
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
my $body = 'x' x 199999;
["POST /fp/4\n${body}a", "POST /fp/4\n${body}a", "POST /fp/4\n${body}b"]
--- more_headers
Idempotency-Key: fp-large
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true",
 "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json"]
--- response_body_like eval
[qr/"execution":1,"body_length":200000,/, qr/"execution":1,"body_length":200000,/, qr/"status":422[,}]/]
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]


=== TEST 5: a chunked request body is fingerprinted like the same bytes with Content-Length
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /fp/5\n" . "6\r\namount\r\n4\r\n=100\r\n0\r\n\r\n",
 "POST /fp/5\namount=100",
 "POST /fp/5\n" . "6\r\namount\r\n4\r\n=200\r\n0\r\n\r\n"]
--- more_headers eval
["Idempotency-Key: fp-chunked\nTransfer-Encoding: chunked",
 "Idempotency-Key: fp-chunked",
 "Idempotency-Key: fp-chunked\nTransfer-Encoding: chunked"]
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true",
 "X-Idempotency-Status: mismatch"]
--- response_body_like eval
[qr/"execution":1,"body_length":10,/, qr/"execution":1,"body_length":10,/, qr/"status":422[,}]/]
--- no_error_log
[error]
