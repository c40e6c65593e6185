# idempotency_redis_sentinel: the module asks Redis Sentinel for the master
# and follows a failover without a reload. A master, its replica and one
# sentinel (quorum 1) run on loopback ports started here.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

our ($sentinel, $first_master, $replica) = start_redis_sentinel();

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: the master named by the sentinel stores the response
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_PORT;
--- config eval
main::idem_location()
--- request
POST /sentinel/1
x
--- more_headers
Idempotency-Key: sentinel-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[info\] .*idempotency: Redis Sentinel: master "mymaster" is 127\.0\.0\.1:$main::first_master$/


=== TEST 2: ... and replays it
--- request
POST /sentinel/1
x
--- more_headers
Idempotency-Key: sentinel-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1


=== TEST 3: a failover: the replica becomes master, the gateway follows it without a reload
--- init
my $master = $main::first_master;
Test::More::is(IdempotencyTest::redis_command_at($master, 'EXISTS', IdempotencyTest::redis_key('sentinel-1')), 1,
               'TEST 3: the record is on the first master');
IdempotencyTest::replica_caught_up($master, $main::replica)
    or die "TEST 3: the replica $main::replica did not catch up with the master $master within 10 s\n";
# the replica promoted and the old master demoted (it then answers READONLY to writes)
IdempotencyTest::switch_master(sentinel => $main::sentinel, old => $master, new => $main::replica);
--- request
POST /sentinel/1
x
--- more_headers
Idempotency-Key: sentinel-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis Sentinel: master "mymaster" is 127\.0\.0\.1:$main::replica, was 127\.0\.0\.1:$main::first_master$/


=== TEST 4: ... a new key is executed once and replayed, on the new master
--- request eval
["POST /sentinel/2\nx", "POST /sentinel/2\nx"]
--- more_headers
Idempotency-Key: sentinel-2
--- error_code eval
[201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 5: ... the new key was stored on the new master
--- init
Test::More::is(IdempotencyTest::redis_command_at($main::replica, 'EXISTS', IdempotencyTest::redis_key('sentinel-2')), 1,
               'TEST 5: sentinel-2 is on the new master');
--- request
POST /sentinel/2
x
--- more_headers
Idempotency-Key: sentinel-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true


=== TEST 6: no sentinel answers: 503, not forwarded
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::idem_location()
--- request
POST /sentinel/none
x
--- more_headers
Idempotency-Key: sentinel-none
--- error_code: 503
--- response_headers
X-Idempotency-Status: unavailable
--- error_log
idempotency: Redis Sentinel: cannot find master "mymaster"


=== TEST 7: a master name the sentinel does not know: 503, and the log says so
--- http_config
idempotency_redis_sentinel othermaster 127.0.0.1:$TEST_NGINX_SENTINEL_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /sentinel/unknown
x
--- more_headers
Idempotency-Key: sentinel-unknown
--- error_code: 503
--- error_log
cannot find master "othermaster": the sentinels do not name it


=== TEST 8: nginx -t: the master's name comes first, then at least one sentinel
--- http_config
idempotency_redis_sentinel mymaster password=x;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_redis_sentinel" needs at least one address
