# What the module leaves alone (docs/design.md#untouched): methods it does not protect,
# locations with idempotency off, subrequests; $idempotency_status is empty
# there. And how keys are namespaced: idempotency_scope keeps callers apart,
# idempotency_key_prefix names the Redis keys.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: GET is not protected: the same key executes twice, $idempotency_status is empty
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location()
--- request eval
["GET /u/1", "GET /u/1"]
--- more_headers
Idempotency-Key: untouched-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed\n!X-Idempotency-Status",
 "X-Upstream-Execution: 2\n!Idempotent-Replayed\n!X-Idempotency-Status"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":2,/]
--- no_error_log
[error]


=== TEST 2: idempotency off in a location leaves its POSTs alone
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
idempotency on;
location / {
    idempotency off;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /u/2\nx", "POST /u/2\nx"]
--- more_headers
Idempotency-Key: untouched-2
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed\n!X-Idempotency-Status",
 "X-Upstream-Execution: 2\n!Idempotent-Replayed\n!X-Idempotency-Status"]
--- no_error_log
[error]


=== TEST 3: a subrequest is untouched: every mirror of a keyed POST executes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'mirror /mirror', 'proxy_pass http://backend')
. main::location_conf('= /mirror', 'internal', 'idempotency on',
                      'proxy_pass http://backend/mirrored$request_uri')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request eval
["POST /u/3\nx", "POST /u/3\nx", "GET /_count/mirrored/u/3"]
--- more_headers
Idempotency-Key: untouched-3
--- error_code eval
[201, 201, 200]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 2\n!Idempotent-Replayed", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":2,/, qr/\A2\z/]
--- no_error_log
[error]


=== TEST 4: idempotency_scope: the same key of two tenants executes twice, each replays its own
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope $http_x_tenant')
--- request eval
[("POST /u/4\nx") x 4]
--- more_headers eval
["X-Tenant: tenant-a\nIdempotency-Key: scoped-4", "X-Tenant: tenant-b\nIdempotency-Key: scoped-4",
 "X-Tenant: tenant-a\nIdempotency-Key: scoped-4", "X-Tenant: tenant-b\nIdempotency-Key: scoped-4"]
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 2"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":2,/, qr/"execution":1,/, qr/"execution":2,/]
--- no_error_log
[error]


=== TEST 5: idempotency_key_prefix names the module's Redis keys
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_key_prefix custom:')
--- request eval
["POST /u/5\nx", "POST /u/5\nx"]
--- more_headers
Idempotency-Key: prefixed-5
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 6: ... the record is under the custom prefix, and scoped records under their scope
--- init
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('prefixed-5', '', 'custom:')),
               'response', 'TEST 6: the record of prefixed-5 is under custom:');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('prefixed-5')),
               undef, 'TEST 6: nothing of prefixed-5 under the default idem:');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('scoped-4', 'tenant-b')),
               'response', 'TEST 6: the record of scoped-4 for tenant-b is under its scope');
--- request
POST /u/5
x
--- more_headers
Idempotency-Key: prefixed-5
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
X-Upstream-Execution: 1


=== TEST 7: scoped by Authorization: one caller's response never replays to another
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency       on', 'idempotency_scope $http_authorization',
                    'add_header X-Idempotency-Status $idempotency_status always',
                    'proxy_pass http://backend')
--- request eval
["POST /scoped/7\namount=100", "POST /scoped/7\namount=100", "POST /scoped/7\namount=100",
 "POST /scoped/7\namount=100", "POST /scoped/7\namount=100"]
--- more_headers eval
["Authorization: Bearer alice\nIdempotency-Key: same-key", "Authorization: Bearer bob\nIdempotency-Key: same-key",
 "Idempotency-Key: same-key",
 "Authorization: Bearer alice\nIdempotency-Key: same-key", "Authorization: Bearer bob\nIdempotency-Key: same-key"]
--- error_code eval
[201, 201, 201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: new\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 3",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 2"]
