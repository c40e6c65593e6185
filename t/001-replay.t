# The first request with a key goes upstream; every retry gets its response
# back byte for byte, with Idempotent-Replayed: true, and the upstream is
# not contacted again (docs/design.md#first-execution,
# #replay).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a retry replays the first response and the upstream runs once
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location()
--- request eval
["POST /pay/1\n" . "amount=100", "POST /pay/1\n" . "amount=100", "POST /pay/1\n" . "amount=100"]
--- more_headers
Idempotency-Key: k1
--- error_code eval
[201, 201, 201]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/, qr/"execution":1,/]
--- response_headers eval
["X-Idempotency-Status: new\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 2: the stored body is replayed byte for byte, binary and large
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /pay/2?binary=1&size=300000\nx", "POST /pay/2?binary=1&size=300000\nx"]
--- more_headers
Idempotency-Key: binary-large
--- error_code eval
[201, 201]
--- response_body eval
my $body = substr(CORE::join('', map { chr } 0 .. 255) x 1200, 0, 300000);
[$body, $body]
--- response_headers eval
["Content-Length: 300000\nX-Upstream-Execution: 1", "Content-Length: 300000\nIdempotent-Replayed: true"]


=== TEST 3: a chunked upstream response is replayed with a Content-Length
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_http_version 1.1', 'proxy_pass http://backend')
--- request eval
["POST /pay/3?chunked=1&size=5000\nx", "POST /pay/3?chunked=1&size=5000\nx"]
--- more_headers
Idempotency-Key: chunked
--- error_code eval
[201, 201]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{5000}\z/, qr/\A[a-zA-Z0-9\n]{5000}\z/]
--- response_headers eval
["X-Upstream-Execution: 1", "Content-Length: 5000\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 4: repeated headers keep their order; Date and Server are fresh
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /pay/4?cookies=3&header=X-Trace:abc\nx", "POST /pay/4?cookies=3&header=X-Trace:abc\nx"]
--- more_headers
Idempotency-Key: cookies
--- error_code eval
[201, 201]
--- raw_response_headers_like eval
[qr/Set-Cookie: c1=v1\r\nSet-Cookie: c2=v2\r\nSet-Cookie: c3=v3\r\n/,
 qr/\r\nServer: nginx.*\r\nDate: .*Set-Cookie: c1=v1\r\nSet-Cookie: c2=v2\r\nSet-Cookie: c3=v3\r\nX-Trace: abc\r\n.*Idempotent-Replayed: true\r\n/s]


=== TEST 5: an empty 204 response is replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /pay/5?status=204\nx", "POST /pay/5?status=204\nx"]
--- more_headers
Idempotency-Key: empty
--- error_code eval
[204, 204]
--- response_body eval
["", ""]
--- response_headers eval
["X-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 6: HTTP/1.0 clients get the replay too
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /pay/6 HTTP/1.0\nx", "POST /pay/6 HTTP/1.0\nx"]
--- more_headers
Idempotency-Key: http10
--- error_code eval
[201, 201]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/]
--- response_headers eval
["!Idempotent-Replayed", "Idempotent-Replayed: true"]


=== TEST 7: other content handlers are captured too (return, reached through try_files)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('= /stamp', 'idempotency on', 'add_header X-Status $idempotency_status always',
                    'try_files /nonexistent @stamp')
. main::location_conf('@stamp', 'add_header X-Status $idempotency_status always',
                      'return 200 "request $request_id\\n"')
--- request eval
["POST /stamp\nx", "POST /stamp\nx"]
--- more_headers
Idempotency-Key: return-handler
--- error_code eval
[200, 200]
--- response_headers eval
["X-Status: new", "X-Status: replayed\nIdempotent-Replayed: true"]
--- response_body_like eval
[qr/^request (\w+)\n/, qr/^request \w+\n/]
