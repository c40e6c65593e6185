# Fenced writes
# (docs/design.md#only-the-claim-stores): an original whose claim was taken over while its
# upstream was still working can no longer store its response, release the
# key or renew the claim; each refusal is logged. On one Redis and on a
# Redis Cluster (on the zone store, where a stalled worker's claim is taken
# over by a retry on the other worker: t/033-zone-expiry.t).
#
# The takeover is written straight into Redis: the claim is replaced by
# another gateway's claim for the same request (as if the original's claim
# had expired and that gateway had claimed the key, or Redis had lost it).
# Within the claim's lease (lease.hpp) the original's store is a plain
# SET ... XX GET that finds the other claim and replaces it for good: the
# other claim is not put back, since a claim put back could outlive its
# request's store and let a retry execute again (docs/design.md#the-lease);
# a retry is answered from the stored response (TESTs 1 and 4). Past the
# lease the fenced script refuses the store (TEST 8).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

use Time::HiRes qw(time);

start_redis_cluster(3);

master_on();
workers(2);
test_nginx_defaults();
run_tests();

# POSTs "x" to $uri with $key on a new connection and returns it once the
# upstream has started on it.
sub in_flight { IdempotencyTest::start_in_flight(@_) }

# Reads a response to the end of the connection: {status, headers (lower-case
# names), body}.
sub read_response { IdempotencyTest::read_response(@_) }

# Replaces the claim under $rkey (on the Redis at $port) with another
# gateway's claim for the same request: the same fingerprint, another
# token, for $px ms. Returns it.
sub take_over {
    my ($port, $rkey, $px) = @_;
    my $claim = IdempotencyTest::redis_command_at($port, 'GET', $rkey);
    die "no claim under $rkey to take over\n" unless defined $claim && substr($claim, 0, 5) eq "IDM\x01\x01";
    my $token = 'another gateway';
    my $other = substr($claim, 0, 37) . chr(length $token) . $token;
    IdempotencyTest::redis_command_at($port, 'SET', $rkey, $other, 'PX', $px);
    return $other;
}

sub cluster_port {
    my ($key) = @_;
    return (IdempotencyTest::cluster_owner(IdempotencyTest::redis_key($key)))[0];
}

# The original's late write, on the Redis at $port: a takeover while its
# upstream works, then its client gets the upstream's $status, the refusal
# is logged ($log), and the other gateway's claim stays ($stays says how).
sub late_write {
    my ($port, $uri, $key, $status, $log, $stays) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    my $other = take_over($port, $rkey, 60000);
    my $res = read_response($original);
    Test::More::is($res->{status}, $status,
                   "$key: the original's client gets the upstream's " . ($status == 201 ? 'response' : $status));
    IdempotencyTest::error_log_has($log);
    Test::More::ok(IdempotencyTest::redis_command_at($port, 'GET', $rkey) eq $other, "$key: $stays");
}

# The original's late store: its client still gets the response, the other
# claim stays.
sub late_store {
    my ($port, $uri, $key) = @_;
    late_write($port, $uri, $key, 201, 'could not store the response',
               "the other gateway's claim stays, the late response is not stored");
}

# The original's store within its lease, after a takeover: the other
# gateway's claim is replaced by the original's response, which stays
# (docs/design.md#the-lease: a claim is never put back).
sub store_over_claim {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    take_over($port, $rkey, 60000);
    Test::More::is(read_response($original)->{status}, 201, "$key: the original's client gets the upstream's response");
    Test::More::ok(IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind($rkey, $port) // '') eq 'response' }, 5),
                   "$key: the original's response replaced the other claim");
    Test::More::ok(IdempotencyTest::error_log_has('this response replaced that claim and stays', 5),
                   "$key: and says so");
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    Test::More::ok($left > 3_600_000 - 60_000, "$key: it lives idempotency_ttl: $left ms left");
}

# Counts, with INFO commandstats, the Redis commands of one new request
# whose response is stored within its claim's lease: the claim and the
# store, two SETs, and no script.
sub store_within_lease {
    my ($uri, $key) = @_;
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    IdempotencyTest::nginx_post($uri, $key) == 201 or die "POST $uri failed\n";
    IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq 'response' })
        or die "the response to $uri was not stored\n";
    my $stats = IdempotencyTest::redis_command('INFO', 'commandstats');
    my %calls = $stats =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    Test::More::is($calls{set} // 0, 2, "$key: the claim and the store are two SETs");
    Test::More::is(($calls{evalsha} // 0) + ($calls{eval} // 0), 0, "$key: no script ran");
}

# The original's late release (its upstream answers 500): the other claim stays.
sub late_release {
    my ($port, $uri, $key) = @_;
    late_write($port, $uri, $key, 500, 'could not release the key', "the other gateway's claim is not deleted");
}

# The original's late renewal (lock_ttl 3s: every second): the other claim,
# taken for 2.5 s, still expires on its own time.
sub late_renewal {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    take_over($port, $rkey, 2500);
    my $taken = time;
    # the original's first renewal (a second in), refused; an accepted one
    # logs nothing and shows in the TTL below
    IdempotencyTest::error_log_has('could not renew the claim', 2.4);
    my $asked = time;
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    my $most = 2500 - int(($asked - $taken) * 1000) + 20;
    Test::More::ok($left > 0 && $left <= $most,
                   "$key: the other gateway's claim is not extended: ${left} ms left, at most $most");
    read_response($original);
}

__DATA__

=== TEST 1: Redis: a store within the lease after a takeover replaces the other claim for good, a retry replays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 10s')
--- init
main::store_over_claim(IdempotencyTest::redis_port(), '/fence/store?sleep=1', 'fence-store');
--- request
POST /fence/store?sleep=1
x
--- more_headers
Idempotency-Key: fence-store
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
--- error_log
Redis lost the claim on
--- no_error_log
putting back


=== TEST 2: Redis: a late release after a takeover is refused: the upstream's 5xx does not free the other claim
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 10s')
--- init
main::late_release(IdempotencyTest::redis_port(), '/fence/release?status=500&sleep=1', 'fence-release');
--- request
POST /fence/release?status=500&sleep=1
x
--- more_headers
Idempotency-Key: fence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 3: Redis: a late renewal after a takeover is refused: the other claim's TTL is not extended
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 3s', 'proxy_pass http://backend')
--- init
main::late_renewal(IdempotencyTest::redis_port(), '/fence/renew?sleep=1.5', 'fence-renew');
--- request
GET /_count/fence/renew
--- response_body: 1
--- error_log
could not renew the claim: the claim had expired or was taken over


=== TEST 4: Cluster: a store within the lease after a takeover replaces the other claim for good, a retry replays
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config eval
main::idem_location('idempotency_lock_ttl 10s')
--- init
main::store_over_claim(main::cluster_port('cfence-store'), '/cfence/store?sleep=1', 'cfence-store');
--- request
POST /cfence/store?sleep=1
x
--- more_headers
Idempotency-Key: cfence-store
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
--- error_log
Redis lost the claim on
--- no_error_log
putting back


=== TEST 5: Cluster: a late release after a takeover is refused: the upstream's 5xx does not free the other claim
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config eval
main::idem_location('idempotency_lock_ttl 10s')
--- init
main::late_release(main::cluster_port('cfence-release'), '/cfence/release?status=500&sleep=1', 'cfence-release');
--- request
POST /cfence/release?status=500&sleep=1
x
--- more_headers
Idempotency-Key: cfence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 6: Cluster: a late renewal after a takeover is refused: the other claim's TTL is not extended
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 3s', 'proxy_pass http://backend')
--- init
main::late_renewal(main::cluster_port('cfence-renew'), '/cfence/renew?sleep=1.5', 'cfence-renew');
--- request
GET /_count/cfence/renew
--- response_body: 1
--- error_log
could not renew the claim: the claim had expired or was taken over


=== TEST 7: Redis: a response stored within its claim's lease is one plain SET ... XX GET, and no script runs
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- init
main::store_within_lease('/lease/1', 'lease-1');
--- request
POST /lease/1
x
--- more_headers
Idempotency-Key: lease-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true


=== TEST 8: Redis: past the claim's lease a late store goes through the fenced script, which refuses it after a takeover
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('# a lease of 3 s - (1 s + 0.3 s) = 1.7 s; the upstream answers after 2 s',
                    'idempotency_lock_ttl 3s', 'idempotency_redis_timeout 1s')
--- init
main::late_store(IdempotencyTest::redis_port(), '/fence/past-lease?sleep=2', 'fence-past-lease');
--- request
POST /fence/past-lease?sleep=2
x
--- more_headers
Idempotency-Key: fence-past-lease
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not store the response: the claim had expired or was taken over
--- no_error_log
putting back
