# A replay is what the first client received, whatever other filters run
# (SPEC "In the company of other modules"): the stored headers are set where
# nginx keeps them, so gzip, expires and the header filter treat a replay as
# they treated the original.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

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
