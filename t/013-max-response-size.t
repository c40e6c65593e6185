# idempotency_max_response_size: a larger response reaches the client in
# full but is not stored; its retries get 410, never a second execution
# (docs/design.md#unreplayable).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: over the limit: delivered in full, then 410 for the retry
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_max_response_size 4k')
--- request eval
["POST /big/1?size=10000\nx", "POST /big/1?size=10000\nx", "GET /_count/big/1"]
--- more_headers
Idempotency-Key: big-1
--- error_code eval
[201, 410, 200]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{10000}\z/,
 qr/\A\{"type":"[^"]+","title":"[^"]+","status":410,"detail":"[^"]*executed[^"]*"\}\z/,
 qr/\A1\z/]
--- response_headers eval
["X-Idempotency-Status: new\nContent-Length: 10000",
 "X-Idempotency-Status: unreplayable\nContent-Type: application/problem+json\n!X-Upstream-Execution",
 ""]


=== TEST 2: a chunked response of unknown length that grows past the limit
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_max_response_size 4k', 'proxy_http_version 1.1')
--- request eval
["POST /big/2?size=9000&chunked=1\nx", "POST /big/2?size=9000&chunked=1\nx"]
--- more_headers
Idempotency-Key: big-2
--- error_code eval
[201, 410]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{9000}\z/, qr/"status":410/]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: unreplayable"]


=== TEST 3: exactly at the limit is stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_max_response_size 4k',
                    'proxy_pass http://backend')
--- request eval
["POST /big/3?size=4096\nx", "POST /big/3?size=4096\nx"]
--- more_headers
Idempotency-Key: big-3
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 1\nIdempotent-Replayed: true\nContent-Length: 4096"]


=== TEST 4: more than 100 response headers: delivered, not stored, the retry gets 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location()
--- request eval
["POST /big/4?cookies=120\nx", "POST /big/4?cookies=120\nx"]
--- more_headers
Idempotency-Key: big-4
--- error_code eval
[201, 410]
--- raw_response_headers_like eval
[qr/Set-Cookie: c120=v120\r\n/, qr/Content-Type: application\/problem\+json/]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Idempotency-Status: unreplayable"]


=== TEST 5: 90 response headers are stored and replayed in order
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /big/5?cookies=90\nx", "POST /big/5?cookies=90\nx"]
--- more_headers
Idempotency-Key: big-5
--- error_code eval
[201, 201]
--- raw_response_headers_like eval
[qr/Set-Cookie: c1=v1\r\n(?:Set-Cookie: c\d+=v\d+\r\n){88}Set-Cookie: c90=v90\r\n/,
 qr/Set-Cookie: c1=v1\r\n(?:Set-Cookie: c\d+=v\d+\r\n){88}Set-Cookie: c90=v90\r\n.*Idempotent-Replayed: true/s]
