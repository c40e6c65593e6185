# A replay is what the first client received, whatever other filters run
# (SPEC "In the company of other modules"): the stored headers are set where
# nginx keeps them, so gzip, expires and the header filter treat a replay as
# they treated the original.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_H2_PORT} = IdempotencyTest::free_port();
$ENV{TEST_NGINX_GRPC_PORT} = IdempotencyTest::free_port();

# One gRPC-like POST over HTTP/2 to the h2c listener, with the key.
sub h2_post {
    my ($uri, $key) = @_;
    return IdempotencyTest::h2_post($ENV{TEST_NGINX_H2_PORT}, $uri, key => $key, body => 'message',
                                    headers => ['Content-Type: application/grpc']);
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: gzip on, the upstream already sent Content-Encoding: the replay is not compressed a second time
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    gzip on;
    gzip_types application/json;
    gzip_min_length 1;
    proxy_pass http://backend;
}
--- request eval
["POST /f/1?status=200&header=Content-Encoding:gzip\nx", "POST /f/1?status=200&header=Content-Encoding:gzip\nx"]
--- more_headers
Idempotency-Key: filters-1
Accept-Encoding: gzip
--- error_code eval
[200, 200]
--- raw_response_headers_like eval
[qr/\r\nContent-Encoding: gzip\r\n/, qr/\r\nContent-Encoding: gzip\r\n/]
--- raw_response_headers_unlike eval
[qr/Content-Encoding:.*Content-Encoding:/s, qr/Content-Encoding:.*Content-Encoding:/s]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true"]
--- response_body_like eval
[qr/\A\{"path":"\/f\/1","method":"POST","execution":1,/, qr/\A\{"path":"\/f\/1","method":"POST","execution":1,/]


=== TEST 2: gzip on, nginx compresses: the replay is compressed once, like the original
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    gzip on;
    gzip_types application/json;
    gzip_min_length 1;
    proxy_pass http://backend;
}
--- request eval
["POST /f/2?status=200\nx", "POST /f/2?status=200\nx"]
--- more_headers
Idempotency-Key: filters-2
Accept-Encoding: gzip
--- error_code eval
[200, 200]
--- raw_response_headers_like eval
[qr/\r\nContent-Encoding: gzip\r\n/, qr/\r\nContent-Encoding: gzip\r\n/]
--- raw_response_headers_unlike eval
[qr/Content-Encoding:.*Content-Encoding:/s, qr/Content-Encoding:.*Content-Encoding:/s]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true"]
--- response_body_like eval
[qr/\A\x1f\x8b/, qr/\A\x1f\x8b/]


=== TEST 3: expires over the upstream's own Cache-Control and Expires: one of each, on the replay too
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    expires 1h;
    proxy_pass http://backend;
}
--- request eval
["POST /f/3?header=Cache-Control:no-cache&header=Expires:Thu,%2001%20Jan%201970%2000:00:00%20GMT\nx",
 "POST /f/3?header=Cache-Control:no-cache&header=Expires:Thu,%2001%20Jan%201970%2000:00:00%20GMT\nx"]
--- more_headers
Idempotency-Key: filters-3
--- error_code eval
[201, 201]
--- raw_response_headers_like eval
[qr/\r\nCache-Control: max-age=3600\r\n/, qr/\r\nCache-Control: max-age=3600\r\n/]
--- raw_response_headers_unlike eval
[qr/(?:Cache-Control:.*Cache-Control:|Expires:.*Expires:|no-cache|1970)/s,
 qr/(?:Cache-Control:.*Cache-Control:|Expires:.*Expires:|no-cache|1970)/s]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true"]


=== TEST 4: a Location is replayed as the original had it, relative or absolute
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request eval
["POST /f/4?header=Location:/payments/4\nx", "POST /f/4?header=Location:/payments/4\nx",
 "POST /f/4b?header=Location:https://api.example.com/payments/4\nx", "POST /f/4b?header=Location:https://api.example.com/payments/4\nx"]
--- more_headers eval
["Idempotency-Key: filters-4", "Idempotency-Key: filters-4", "Idempotency-Key: filters-4b", "Idempotency-Key: filters-4b"]
--- error_code eval
[201, 201, 201, 201]
--- raw_response_headers_like eval
[qr{\r\nLocation: /payments/4\r\n(?!.*Idempotent-Replayed)}s,
 qr{\r\nLocation: /payments/4\r\n.*Idempotent-Replayed: true\r\n}s,
 qr{\r\nLocation: https://api\.example\.com/payments/4\r\n(?!.*Idempotent-Replayed)}s,
 qr{\r\nLocation: https://api\.example\.com/payments/4\r\n.*Idempotent-Replayed: true\r\n}s]


=== TEST 5: a first request with Range under proxy_force_ranges: the replay answers Range as the original did
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_force_ranges on;
    proxy_pass http://backend;
}
--- request eval
["POST /f/5?status=200&size=1000\nx", "POST /f/5?status=200&size=1000\nx", "POST /f/5?status=200&size=1000\nx"]
--- more_headers eval
["Idempotency-Key: filters-5\nRange: bytes=0-99", "Idempotency-Key: filters-5\nRange: bytes=0-99", "Idempotency-Key: filters-5"]
--- error_code eval
[206, 206, 200]
--- raw_response_headers_like eval
[qr/\r\nContent-Length: 100\r\n.*Content-Range: bytes 0-99\/1000\r\n/s,
 qr/\r\nContent-Length: 100\r\n.*Content-Range: bytes 0-99\/1000\r\n/s,
 qr/\r\nContent-Length: 1000\r\n.*Accept-Ranges: bytes\r\n/s]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{100}\z/, qr/\A[a-zA-Z0-9\n]{100}\z/, qr/\A[a-zA-Z0-9\n]{1000}\z/]


=== TEST 6: gRPC behind grpc_pass: the replay carries the upstream's trailers (grpc-status)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_GRPC_PORT http2;
    # a gRPC server: the message streamed (ssi drops Content-Length), then
    # the status in trailers
    location / {
        add_trailer grpc-status 0;
        add_trailer grpc-message done-$request_id;
        default_type application/grpc;
        ssi on;
        ssi_types *;
        return 200 "grpc-payload";
    }
}
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location / {
        idempotency on;
        grpc_pass grpc://127.0.0.1:$TEST_NGINX_GRPC_PORT;
    }
}
--- config
location = /probe {
    return 204;
}
--- init
my $first = main::h2_post('/pkg.Service/Pay', 'grpc-1');
my $retry = main::h2_post('/pkg.Service/Pay', 'grpc-1');
Test::More::is($first->{status}, 200, 'TEST 6: the first call is answered');
Test::More::like($first->{trailers}, qr/^grpc-status: 0$/m, 'TEST 6: with grpc-status');
Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', 'TEST 6: the retry is a replay');
Test::More::is($retry->{body}, $first->{body}, 'TEST 6: of the same message');
Test::More::is($retry->{trailers}, $first->{trailers}, 'TEST 6: with the same trailers');
--- request
GET /probe
--- error_code: 204
