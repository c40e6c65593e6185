# idempotency_lock_ttl: the claim of an original that is still running is
# renewed, so an upstream slower than the lock never lets a duplicate run
# (docs/design.md#at-most-once).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';
use Time::HiRes ();

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a duplicate waiting past the lock_ttl gets the replay, not a second execution
--- init
our $original = IdempotencyTest::start_in_flight('/renew/1?sleep=2', 'renew-1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 500ms', 'idempotency_wait 10s')
--- request
POST /renew/1?sleep=2
x
--- more_headers
Idempotency-Key: renew-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: waited


=== TEST 2: past its lock_ttl the running original still holds the key: 409
--- init
my $key = IdempotencyTest::redis_key('renew-2');
our $original = IdempotencyTest::start_in_flight('/renew/2?sleep=3', 'renew-2');
my $start = Time::HiRes::time();
# the lock is 500 ms: once twice that has passed, the claim must still be there
IdempotencyTest::wait_until(sub { Time::HiRes::time() - $start > 1.0 }, 5);
my $kind = IdempotencyTest::stored_kind($key) // 'nothing';
die "the claim was not renewed: found $kind\n" unless $kind eq 'claim';
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 500ms',
                    'proxy_pass http://backend')
--- request
POST /renew/2?sleep=3
x
--- more_headers
Idempotency-Key: renew-2
--- error_code: 409
