# The claim's lease (lease.hpp) never makes things worse than the fenced
# path. A request that holds its claim stores its response unfenced only
# while the lease holds; when Redis lost the claim meanwhile and another
# request claimed, executed and stored, the unfenced store overwrites that
# response and must leave the key as the fenced path would have:
#   - a stored response of the same fingerprint means what ours means: ours
#     stays, for idempotency_ttl (TEST 1);
#   - a stored response of another fingerprint is put back with the very
#     expiry it had (TEST 2, and on a Redis Cluster TEST 5); another
#     request's claim is not put back (t/054, docs/design.md#the-lease);
#   - a renewal that finds the claim gone revokes the lease: the store goes
#     fenced, and touches nothing (TEST 3);
#   - the lease is judged when the store is written to the socket: a store
#     that waited for Redis past its lease goes fenced (TEST 4).
# In each, the key's life is checked with PTTL, and executions are counted
# at the upstream. "Redis lost the claim" is a DEL (or a value written in
# its place) straight into Redis.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time sleep);

start_redis_cluster(3);

test_nginx_defaults();

# Every block: a client's X-Delay header becomes the upstream's ?sleep=
# ($delay_args), and the store is the test Redis unless the block's
# --- http_config names another.
add_block_preprocessor(sub {
    my $block = shift;
    my $store = $block->http_config // "idempotency_redis 127.0.0.1:\$TEST_NGINX_REDIS_PORT;\n";
    $block->set_value('http_config',
        $store . 'map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }' . "\n");
});

run_tests();

# "location /" with `idempotency on` and @directives, proxied with the
# client's delay.
sub delayed_location {
    location_conf('/', 'idempotency on', @_, 'proxy_pass http://backend$uri$delay_args');
}

use constant HOUR_MS => 3_600_000;

# Sends the original: POST $uri with body $body and $key, slowed down at
# the upstream by X-Delay (the location maps it to ?sleep=); returns its
# socket once the upstream has started on it.
sub original {
    my ($uri, $key, $body, $delay) = @_;
    my $before = IdempotencyTest::upstream_count($uri);
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nX-Delay: $delay\r\nContent-Length: " . length($body) . "\r\n\r\n$body");
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) > $before }, 10)
        or die "the original POST $uri never reached the upstream\n";
    return $sock;
}

# Another request of the same key, not slowed down: its status.
sub another {
    my ($uri, $key, $body) = @_;
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: " . length($body) . "\r\n\r\n$body");
    return IdempotencyTest::read_response($sock)->{status};
}

sub stored_response {
    my ($port, $rkey) = @_;
    return IdempotencyTest::wait_until(sub {
        my $v = IdempotencyTest::redis_command_at($port, 'GET', $rkey);
        defined $v && substr($v, 0, 5) eq "IDM\x01\x02" ? $v : undef;
    }, 10);
}

sub commands {
    my ($port) = @_;
    my %calls = IdempotencyTest::redis_command_at($port, 'INFO', 'commandstats') =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    return \%calls;
}

# The original's claim is lost while its upstream works; another request
# (body $other_body) claims, executes and stores; then the original's
# response is stored within its lease. Returns the value and PTTL the
# other request's store left (read before the original's store), and the
# original's status.
sub lost_claim_then_another_stores {
    my ($port, $uri, $key, $other_body) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    # the other request must claim, execute and store while the original's
    # upstream works: 3 s leaves room for that on a loaded machine
    my $original = original($uri, $key, 'x', 3);
    IdempotencyTest::redis_command_at($port, 'DEL', $rkey) or die "no claim under $rkey\n";
    Test::More::is(another($uri, $key, $other_body), 201, "$key: the other request executes");
    my $theirs = stored_response($port, $rkey) or die "$key: the other request's response was not stored\n";
    my $pttl = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    my $status = IdempotencyTest::read_response($original)->{status};
    return ($theirs, $status, $pttl);
}

sub same_fingerprint {
    my ($uri, $key) = @_;
    my $port = IdempotencyTest::redis_port();
    my $rkey = IdempotencyTest::redis_key($key);
    my (undef, $status) = lost_claim_then_another_stores($port, $uri, $key, 'x');
    Test::More::is($status, 201, "$key: the original's client gets its response");
    Test::More::ok(IdempotencyTest::wait_until(sub {
        (IdempotencyTest::redis_command_at($port, 'GET', $rkey) // '') =~ /"execution":1\b/ }, 5),
        "$key: the original's response replaced the other one of the same fingerprint");
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    Test::More::ok($left > HOUR_MS - 60_000, "$key: it lives idempotency_ttl: $left ms left");
    Test::More::is(IdempotencyTest::upstream_count($uri), 2, "$key: two executions");
}

sub other_fingerprint {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my ($theirs, $status, $pttl_before) = lost_claim_then_another_stores($port, $uri, $key, 'y');
    Test::More::is($status, 201, "$key: the original's client gets its response");
    Test::More::ok(IdempotencyTest::error_log_has('putting back what was there'), "$key: the overwritten response is put back");
    Test::More::ok(IdempotencyTest::wait_until(sub { (IdempotencyTest::redis_command_at($port, 'GET', $rkey) // '') eq $theirs }, 5),
                   "$key: the other request's response is back");
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    Test::More::ok($left > HOUR_MS - 60_000 && $left <= $pttl_before,
                   "$key: with the life it had: $left ms left (had $pttl_before)");
    Test::More::is(IdempotencyTest::upstream_count($uri), 2, "$key: two executions");
}

# lock_ttl 4s, redis_timeout 300ms: a lease of 3.3 s; renewals every 1.33 s.
# The claim is lost at once; the first renewal finds it gone; then another
# request stores; then, 2.2 s in (within the lease's time), the original's
# store: fenced, it changes nothing.
sub renewal_revokes {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = original($uri, $key, 'x', 2.2);
    IdempotencyTest::redis_command('DEL', $rkey) or die "no claim under $rkey\n";
    IdempotencyTest::error_log_has('could not renew the claim', 5) or die "$key: the renewal did not find the claim gone\n";
    Test::More::is(another($uri, $key, 'y'), 201, "$key: the other request executes");
    my $theirs = stored_response(IdempotencyTest::redis_port(), $rkey) or die "$key: nothing stored\n";
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, "$key: the original's client gets its response");
    Test::More::ok(IdempotencyTest::error_log_has('could not store the response'), "$key: the original's store is refused");
    my $calls = commands(IdempotencyTest::redis_port());
    Test::More::is($calls->{exec} // 0, 0, "$key: no unfenced store was sent");
    Test::More::ok(($calls->{evalsha} // 0) + ($calls->{eval} // 0) >= 1, "$key: the fenced script was");
    Test::More::is(IdempotencyTest::redis_command('GET', $rkey), $theirs, "$key: the other response is untouched");
    my $left = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok($left > HOUR_MS - 60_000, "$key: and lives on: $left ms left");
    Test::More::is(IdempotencyTest::upstream_count($uri), 2, "$key: two executions");
}

# lock_ttl 3s, redis_timeout 300ms: a lease of 2.4 s. While the upstream
# works, Redis loses the claim to another gateway's (saved, so that Redis
# comes back with it) and goes down; the original's response (1 s in) waits
# for Redis, which comes back after the lease: the store goes fenced.
sub written_past_lease {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $start = time;
    my $original = original($uri, $key, 'x', 1);
    my $claim = IdempotencyTest::redis_command('GET', $rkey) // die "no claim under $rkey\n";
    my $token = 'another gateway';
    my $other = substr($claim, 0, 37) . chr(length $token) . $token;
    IdempotencyTest::redis_command('SET', $rkey, $other, 'PX', 60_000);
    IdempotencyTest::redis_command('SAVE');
    IdempotencyTest::stop_redis();
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, "$key: the original's client gets its response");
    my $past_lease = $start + 2.4 + 0.3;
    sleep($past_lease - time) if time < $past_lease;  # the lease is a time: wait until it has passed
    IdempotencyTest::start_redis();
    my $dir = IdempotencyTest::redis_command('CONFIG', 'GET', 'dir')->[1];
    unlink "$dir/dump.rdb";
    Test::More::ok(IdempotencyTest::error_log_has('could not store the response', 10), "$key: the store, sent once Redis is back, is refused");
    my $calls = commands(IdempotencyTest::redis_port());
    Test::More::is($calls->{exec} // 0, 0, "$key: it left as the fenced script, not unfenced");
    Test::More::is(IdempotencyTest::redis_command('GET', $rkey), $other, "$key: the other gateway's claim is untouched");
    my $left = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok($left > 50_000, "$key: and keeps its life: $left ms left");
}

__DATA__

=== TEST 1: Redis: the claim lost mid-request, another request of the same fingerprint executes and stores: the original's store keeps idempotency_ttl, two executions, its retry replays
--- config eval
main::delayed_location('idempotency_lock_ttl 10s', 'idempotency_ttl 1h')
--- init
main::same_fingerprint('/putback/same', 'putback-same');
--- request
POST /putback/same
x
--- more_headers
Idempotency-Key: putback-same
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body_like: "execution":1\b
--- error_log
another request of the same key and fingerprint executed and stored its response
--- no_error_log
putting back


=== TEST 2: Redis: the claim lost mid-request, another request of another fingerprint executes and stores: put back with the life it had, two executions
--- config eval
main::delayed_location('idempotency_lock_ttl 10s', 'idempotency_ttl 1h')
--- init
main::other_fingerprint(IdempotencyTest::redis_port(), '/putback/other', 'putback-other');
--- request
POST /putback/other
y
--- more_headers
Idempotency-Key: putback-other
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body_like: "execution":2\b


=== TEST 3: Redis: a renewal that finds the claim gone revokes the lease: the store goes fenced and changes nothing
--- config eval
main::delayed_location('idempotency_lock_ttl 4s', 'idempotency_redis_timeout 300ms', 'idempotency_ttl 1h')
--- init
main::renewal_revokes('/putback/revoked', 'putback-revoked');
--- request
POST /putback/revoked
y
--- more_headers
Idempotency-Key: putback-revoked
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- no_error_log
putting back


=== TEST 4: Redis: a store that waited for Redis past its lease is written as the fenced script
--- config eval
main::delayed_location('idempotency_lock_ttl 3s', 'idempotency_redis_timeout 300ms')
--- init
main::written_past_lease('/putback/late', 'putback-late');
--- request
POST /putback/late
x
--- more_headers
Idempotency-Key: putback-late
--- error_code: 409
--- no_error_log
putting back


=== TEST 5: Cluster: the claim lost mid-request, another request of another fingerprint executes and stores: put back with the life it had
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_2;
--- config eval
main::delayed_location('idempotency_lock_ttl 10s', 'idempotency_ttl 1h')
--- init
main::other_fingerprint((IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('putback-cluster')))[0],
                        '/putback/cluster', 'putback-cluster');
--- request
POST /putback/cluster
y
--- more_headers
Idempotency-Key: putback-cluster
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
