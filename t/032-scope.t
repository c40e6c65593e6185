# Scopes (docs/design.md#scopes-apart,
# #no-raw-keys): the same
# Idempotency-Key sent under different scopes is a different intent, each
# executed once and replayed only to its own scope, on either store (the
# file runs on Redis and on the zone store). The scopes differ in length,
# share a long prefix and differ in their last byte only, are empty or not,
# come from Authorization; scope "ab" with key "c" and scope "a" with key
# "bc" are two intents. On Redis each record is found under the key derived
# from its own scope and nowhere else (the --- redis_only blocks).
#
# Two workers: every block sends one key under at least three scopes, so a
# scope that a worker evaluated once and kept would make two of them meet.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location);
use Test::Nginx::Socket 'no_plan';

master_on();
workers(2);
test_nginx_defaults();

# Tenants: two of one length differing in their last byte only (past any
# short prefix), one that is their prefix, one of a single byte.
our @TENANTS = ('acme-payments-eu-0001', 'acme-payments-eu-0002', 'acme', 'b');
# Callers by Authorization: one length, the same long prefix.
our @CALLERS = ('Bearer sk_test_51HxQzTenant0001', 'Bearer sk_test_51HxQzTenant0002');

run_tests();

# Checks that the record of $key under each of @$scopes is a stored response,
# and that nothing of $key is under each of @$absent.
sub records_under {
    my ($name, $key, $scopes, $absent) = @_;
    for my $scope (@$scopes) {
        Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key, $scope)), 'response',
                       "$name: the record of $key for scope \"$scope\" is under that scope");
    }
    for my $scope (@$absent) {
        Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key, $scope)), undef,
                       "$name: nothing of $key under scope \"$scope\"");
    }
}

__DATA__

=== TEST 1: tenants of different lengths and of one length: each executes once and replays its own response
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope $http_x_tenant')
--- request eval
[("POST /s/1\nx") x 8, "GET /_count/s/1"]
--- more_headers eval
[(map { "X-Tenant: $_\nIdempotency-Key: scope-1" } @main::TENANTS, reverse @main::TENANTS), ""]
--- error_code eval
[(201) x 8, 200]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 1 .. 4),
 (map { "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: $_" } reverse 1 .. 4),
 ""]
--- response_body_like eval
[(map { qr/"execution":$_,/ } 1 .. 4, reverse 1 .. 4), qr/\A4\z/]
--- no_error_log
[error]


=== TEST 2: ... each tenant's record is under the key derived from its own scope, none under the empty scope or a prefix
--- redis_only
--- init
main::records_under('TEST 2', 'scope-1', \@main::TENANTS, ['', 'a', 'acme-payments-eu-000', 'acme-pay']);
--- request
GET /_count/s/1
--- response_body: 4


=== TEST 3: scope "ab" with key "c", scope "a" with key "bc" and key "abc" without a scope are three intents
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope $http_x_tenant')
--- request eval
[("POST /s/3\nx") x 6, "GET /_count/s/3"]
--- more_headers eval
["X-Tenant: ab\nIdempotency-Key: c", "X-Tenant: a\nIdempotency-Key: bc", "Idempotency-Key: abc",
 "Idempotency-Key: abc", "X-Tenant: a\nIdempotency-Key: bc", "X-Tenant: ab\nIdempotency-Key: c", ""]
--- error_code eval
[(201) x 6, 200]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 1 .. 3),
 (map { "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: $_" } reverse 1 .. 3),
 ""]
--- response_body_like eval
[(map { qr/"execution":$_,/ } 1 .. 3, reverse 1 .. 3), qr/\A3\z/]
--- no_error_log
[error]


=== TEST 4: ... each of the three records is under its own scope and key
--- redis_only
--- init
main::records_under('TEST 4', 'c', ['ab'], ['', 'a']);
main::records_under('TEST 4', 'bc', ['a'], ['', 'ab']);
main::records_under('TEST 4', 'abc', [''], ['a', 'ab']);
--- request
GET /_count/s/3
--- response_body: 3


=== TEST 5: an empty scope and non-empty ones: the same key executes once in each
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope $http_x_tenant')
--- request eval
[("POST /s/5\nx") x 6, "GET /_count/s/5"]
--- more_headers eval
["Idempotency-Key: scope-5", "X-Tenant: t\nIdempotency-Key: scope-5", "X-Tenant: tenant\nIdempotency-Key: scope-5",
 "X-Tenant: tenant\nIdempotency-Key: scope-5", "X-Tenant: t\nIdempotency-Key: scope-5", "Idempotency-Key: scope-5", ""]
--- error_code eval
[(201) x 6, 200]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 1 .. 3),
 (map { "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: $_" } reverse 1 .. 3),
 ""]
--- response_body_like eval
[(map { qr/"execution":$_,/ } 1 .. 3, reverse 1 .. 3), qr/\A3\z/]
--- no_error_log
[error]


=== TEST 6: ... the unscoped request's record is under the empty scope, the others under theirs
--- redis_only
--- init
main::records_under('TEST 6', 'scope-5', ['', 't', 'tenant'], ['tenan']);
--- request
GET /_count/s/5
--- response_body: 3


=== TEST 7: scoped by Authorization, two callers and an anonymous one: no response reaches another caller
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope $http_authorization')
--- request eval
[("POST /s/7\namount=100") x 6, "GET /_count/s/7"]
--- more_headers eval
["Authorization: $main::CALLERS[0]\nIdempotency-Key: scope-7", "Authorization: $main::CALLERS[1]\nIdempotency-Key: scope-7",
 "Idempotency-Key: scope-7",
 "Authorization: $main::CALLERS[1]\nIdempotency-Key: scope-7", "Authorization: $main::CALLERS[0]\nIdempotency-Key: scope-7",
 "Idempotency-Key: scope-7", ""]
--- error_code eval
[(201) x 6, 200]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 1 .. 3),
 (map { "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: $_" } 2, 1, 3),
 ""]
--- response_body_like eval
[(map { qr/"execution":$_,/ } 1 .. 3, 2, 1, 3), qr/\A3\z/]
--- no_error_log
[error]


=== TEST 8: ... each caller's record is under its own Authorization, the anonymous one's under the empty scope
--- redis_only
--- init
main::records_under('TEST 8', 'scope-7', [@main::CALLERS, ''], ['Bearer', 'Bearer sk_test_51HxQzTenant000']);
--- request
GET /_count/s/7
--- response_body: 3
