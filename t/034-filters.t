# A replay is what the first client received, whatever other filters run
# (docs/design.md#replay-as-received): the stored headers are set where
# nginx keeps them, so gzip, expires and the header filter treat a replay as
# they treated the original.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
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
--- config eval
main::location_conf('/', 'idempotency on', 'gzip on', 'gzip_types application/json',
                    'gzip_min_length 1', 'proxy_pass http://backend')
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
--- config eval
main::location_conf('/', 'idempotency on', 'gzip on', 'gzip_types application/json',
                    'gzip_min_length 1', 'proxy_pass http://backend')
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
--- config eval
main::location_conf('/', 'idempotency on', 'expires 1h', 'proxy_pass http://backend')
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
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
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


=== TEST 5: Range on a protected request is not applied: the original and every replay are the whole response
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_force_ranges on', 'proxy_pass http://backend')
--- request eval
["POST /f/5?status=200&size=1000\nx", "POST /f/5?status=200&size=1000\nx", "POST /f/5?status=200&size=1000\nx"]
--- more_headers eval
["Idempotency-Key: filters-5\nRange: bytes=0-99", "Idempotency-Key: filters-5\nRange: bytes=0-99", "Idempotency-Key: filters-5"]
--- error_code eval
[200, 200, 200]
--- raw_response_headers_like eval
[qr/\r\nContent-Length: 1000\r\n/, qr/\r\nContent-Length: 1000\r\n/, qr/\r\nContent-Length: 1000\r\n/]
--- raw_response_headers_unlike eval
[qr/Content-Range|Accept-Ranges/, qr/Content-Range|Accept-Ranges/, qr/Content-Range|Accept-Ranges/]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1000}\z/, qr/\A[a-zA-Z0-9\n]{1000}\z/, qr/\A[a-zA-Z0-9\n]{1000}\z/]


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
--- config eval
main::location_conf('= /probe', 'return 204')
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


=== TEST 7: a conditional retry gets the stored response, never a 412 or 304 made from it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["PATCH /f/7a?status=200&header=ETag:%22v2%22\nx", "PATCH /f/7a?status=200&header=ETag:%22v2%22\nx",
 "PATCH /f/7b?status=200&header=ETag:%22v2%22\nx", "PATCH /f/7b?status=200&header=ETag:%22v2%22\nx",
 "PATCH /f/7c?status=200&header=Last-Modified:Wed,%2001%20Jan%202025%2000:00:00%20GMT\nx",
 "PATCH /f/7c?status=200&header=Last-Modified:Wed,%2001%20Jan%202025%2000:00:00%20GMT\nx"]
--- more_headers eval
["Idempotency-Key: filters-7a\nIf-Match: \"v1\"", "Idempotency-Key: filters-7a\nIf-Match: \"v1\"",
 "Idempotency-Key: filters-7b\nIf-None-Match: *", "Idempotency-Key: filters-7b\nIf-None-Match: *",
 "Idempotency-Key: filters-7c\nIf-Unmodified-Since: Mon, 01 Jan 2024 00:00:00 GMT",
 "Idempotency-Key: filters-7c\nIf-Unmodified-Since: Mon, 01 Jan 2024 00:00:00 GMT"]
--- error_code eval
[200, 200, 200, 200, 200, 200]
--- response_headers eval
["!Idempotent-Replayed\nETag: \"v2\"", "Idempotent-Replayed: true\nETag: \"v2\"",
 "!Idempotent-Replayed\nETag: \"v2\"", "Idempotent-Replayed: true\nETag: \"v2\"",
 "!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/, qr/"execution":1,/, qr/"execution":1,/, qr/"execution":1,/, qr/"execution":1,/]


=== TEST 8: SSI runs once: the replay is the bytes the client got, and the included fragment is not fetched again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/ssi/', 'idempotency on', 'ssi on', 'ssi_types *',
                    'proxy_pass http://127.0.0.1:$TEST_NGINX_SERVER_PORT/ssi-source/')
. main::location_conf('/ssi-source/',
                      'return 201 \'before <!--# include virtual="/frag/8" --> after\'')
. main::location_conf('/frag/', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request eval
["POST /ssi/8\nx", "POST /ssi/8\nx", "GET /_count/frag/8"]
--- more_headers eval
["Idempotency-Key: filters-8", "Idempotency-Key: filters-8", ""]
--- error_code eval
[201, 201, 200]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true", ""]
--- response_body_like eval
[qr/\Abefore \{"path":"\/frag\/8","method":"GET","execution":1,.*\} after\z/,
 qr/\Abefore \{"path":"\/frag\/8","method":"GET","execution":1,.*\} after\z/, qr/\A1\z/]


=== TEST 9: sub_filter with a variable and add_after_body run once (addition applies to 200): the replay carries the original's bytes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/f/', 'idempotency on',
                    'sub_filter \'"path"\' \'"marker":"$http_x_marker","path"\'',
                    'sub_filter_types application/json', 'add_after_body /tail/9',
                    'addition_types application/json', 'proxy_pass http://backend')
. main::location_conf('/tail/', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request eval
["POST /f/9?status=200\nx", "POST /f/9?status=200\nx", "GET /_count/tail/9"]
--- more_headers eval
["Idempotency-Key: filters-9\nX-Marker: first", "Idempotency-Key: filters-9\nX-Marker: second", ""]
--- error_code eval
[200, 200, 200]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true", ""]
--- response_body_like eval
[qr/\A\{"marker":"first","path":"\/f\/9",.*\}\{"path":"\/tail\/9","method":"GET","execution":1,.*\}\z/s,
 qr/\A\{"marker":"first","path":"\/f\/9",.*\}\{"path":"\/tail\/9","method":"GET","execution":1,.*\}\z/s, qr/\A1\z/]


=== TEST 10: add_header runs on the replay as on the original, once, with the replay's values
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'add_header X-Status $idempotency_status',
                    'add_header X-Marker $http_x_marker', 'proxy_pass http://backend')
--- request eval
["POST /f/10\nx", "POST /f/10\nx"]
--- more_headers eval
["Idempotency-Key: filters-10\nX-Marker: first", "Idempotency-Key: filters-10\nX-Marker: second"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Status: new\nX-Marker: first", "X-Status: replayed\nX-Marker: second\nIdempotent-Replayed: true"]
--- raw_response_headers_unlike eval
[qr/X-Status:.*X-Status:|X-Marker:.*X-Marker:/s, qr/X-Status:.*X-Status:|X-Marker:.*X-Marker:/s]


=== TEST 11: an X-Accel-Redirect file's Last-Modified is replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/f/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/xa/', 'internal', 'root html')
--- user_files
>>> xa/receipt.txt
receipt 11
--- request eval
["POST /f/11?header=X-Accel-Redirect:/xa/receipt.txt\nx", "POST /f/11?header=X-Accel-Redirect:/xa/receipt.txt\nx"]
--- more_headers
Idempotency-Key: filters-11
--- error_code eval
[200, 200]
--- raw_response_headers_like eval
[qr/\r\nLast-Modified: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n(?!.*Idempotent-Replayed)/s,
 qr/\r\nLast-Modified: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n.*Idempotent-Replayed: true\r\n/s]
--- raw_response_headers_unlike eval
[qr/Last-Modified:.*Last-Modified:/s, qr/Last-Modified:.*Last-Modified:/s]
--- response_body eval
["receipt 11\n", "receipt 11\n"]
