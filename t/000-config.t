# Configuration errors are refused when nginx loads the configuration, with a
# message naming the directive; a Redis server that is down at start-up is
# not a configuration error (docs/design.md#configuration-checks).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf counted_location);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: every directive is accepted with valid values
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT db=0;
idempotency_redis_timeout 500ms;
idempotency_methods POST PATCH PUT;
idempotency_header Idempotency-Key;
idempotency_required off;
idempotency_ttl 1h;
idempotency_lock_ttl 10s;
idempotency_wait 0;
idempotency_scope "";
idempotency_key_prefix idem:;
idempotency_max_response_size 64k;
idempotency_store_errors off;
idempotency_fail_open off;
--- config eval
main::idem_location()
. main::location_conf('/other/',
                      'idempotency_redis unix:/nonexistent/redis.sock password=secret username=app')
--- request
POST /conf/1
x
--- more_headers
Idempotency-Key: conf-valid
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- no_error_log
[emerg]
[alert]
[crit]


=== TEST 2: an unknown method in idempotency_methods
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_methods POST FROBNICATE',
                    'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"FROBNICATE".*"idempotency_methods"/


=== TEST 3: a bad size in idempotency_max_response_size
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_max_response_size 10q',
                    'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_max_response_size"/


=== TEST 4: idempotency on without idempotency_redis anywhere
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*\bidempotency\b.*"idempotency_redis"/


=== TEST 5: an unknown idempotency_redis parameter
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT foo=1;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"foo=".*"idempotency_redis"/


=== TEST 6: an invalid Redis address
--- http_config
idempotency_redis 127.0.0.1:99999;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"127\.0\.0\.1:99999".*"idempotency_redis"/


=== TEST 7: idempotency_ttl 0
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_ttl 0', 'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_ttl"/


=== TEST 8: an invalid header name in idempotency_header
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_header "Idempotency Key"',
                    'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"Idempotency Key".*"idempotency_header"/


=== TEST 9: a Redis that is down at start-up is not a configuration error
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::counted_location()
--- request eval
["POST /conf/9\nx", "GET /_count/conf/9"]
--- more_headers
Idempotency-Key: conf-redis-down
--- error_code eval
[503, 200]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nRetry-After: [1-9][0-9]*\nX-Idempotency-Status: unavailable", ""]
--- response_body_like eval
[qr/"status":503/, qr/\A0\z/]
--- no_error_log
[emerg]


=== TEST 10: idempotency_header with an underscore, which nginx drops from requests by default
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_header X_Request_Key',
                    'proxy_pass http://backend')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_header" "X_Request_Key" has an underscore.*"underscores_in_headers on"/


=== TEST 11: ... accepted once the server lets such headers through, and the key is read from it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
underscores_in_headers on;
location / {
    idempotency on;
    idempotency_header X_Request_Key;
    proxy_pass http://backend;
}
--- request eval
["POST /cfg/21\nx", "POST /cfg/21\nx"]
--- more_headers
X_Request_Key: underscore-21
--- error_code eval
[201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
