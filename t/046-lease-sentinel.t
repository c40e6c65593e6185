# The claim's lease (lease.hpp) through a Redis Sentinel failover, which
# loses the claim the way Sentinel loses writes: replication is
# asynchronous, and a forced failover (SENTINEL FAILOVER) promotes the
# replica at once, without what the master acknowledged but had not yet
# replicated. Here the master acknowledges the original's claim, the
# replica never gets it, and the sentinel promotes the replica. Another
# request of the same key, of another fingerprint, claims on the new
# master, executes and stores. Then the original's response is stored
# within its lease on the new master, overwriting that response: it must
# be put back with the life it had (idempotency_ttl, not lock_ttl), so that
# a retry of the other request is replayed, never executed a third time.
#
# How the replica misses the claim: it is given a wrong masterauth and its
# link is cut on the master (CLIENT KILL TYPE replica); each time it comes
# back it fails to authenticate, so the master streams it nothing, while
# the sentinel still counts it as the master's replica (a link down for
# less than ten times down-after-milliseconds does not disqualify it).
# Every step is awaited by asking Redis or the sentinel; the one time that
# is not awaited is the original's at the upstream (DELAY), and the test
# dies, rather than passes, when the failover did not fit in it.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time);

our ($sentinel, $first_master, $replica) = start_redis_sentinel();

test_nginx_defaults();
run_tests();

use constant HOUR_MS => 3_600_000;
# The original's time at the upstream (s). The failover happens meanwhile:
# the promotion takes about a second, the old master's demotion about ten
# (the sentinel waits 8 s before it reconfigures a master that came back
# as one). lock_ttl 60s: the first renewal (20 s) comes after the store.
use constant DELAY => 16;

sub info_replication {
    my ($port) = @_;
    return eval { IdempotencyTest::redis_command_at($port, 'INFO', 'replication') } // '';
}

# From now on the replica gets nothing from the master, and knows it.
sub cut_replication {
    IdempotencyTest::replica_caught_up($first_master, $replica)
        or die "the replica $replica did not catch up with the master $first_master within 10 s\n";
    IdempotencyTest::redis_command_at($replica, 'CONFIG', 'SET', 'masterauth', 'not-the-password');
    IdempotencyTest::redis_command_at($first_master, 'CLIENT', 'KILL', 'TYPE', 'replica');
    IdempotencyTest::wait_until(sub {
        info_replication($replica) =~ /master_link_status:down/ && info_replication($first_master) =~ /connected_slaves:0/
    }, 10) or die "the replica's link to the master did not go down within 10 s (INFO replication: "
                . "master_link_status:down on the replica, connected_slaves:0 on the master)\n";
}

sub send_post {
    my ($uri, $key, $body, $delay) = @_;
    return IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\n" . (defined $delay ? "X-Delay: $delay\r\n" : '')
        . "Content-Length: " . length($body) . "\r\n\r\n$body");
}

sub logged {
    my ($text, $secs) = @_;
    return IdempotencyTest::wait_until(sub {
        open my $fh, '<', $Test::Nginx::Util::ErrLogFile or return 0;
        local $/;
        return index(<$fh> // '', $text) >= 0;
    }, $secs // 5);
}

sub failover_loses_the_claim {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    cut_replication();

    # The original claims on the master and is held at the upstream.
    my $start = time;
    my $original = send_post($uri, $key, 'x', DELAY);
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) == 1 }, 10)
        or die "$key: the original did not reach the upstream within 10 s\n";
    my $claim = IdempotencyTest::redis_command_at($first_master, 'GET', $rkey)
        // die "no claim under $rkey on the master\n";
    Test::More::is(substr($claim, 0, 5), "IDM\x01\x01", "$key: the original's claim is on the master");
    Test::More::is(IdempotencyTest::redis_command_at($replica, 'EXISTS', $rkey), 0, "$key: the replica never got it");

    # A forced failover: the sentinel promotes the replica at once; some
    # seconds later it demotes the old master, which then answers READONLY
    # and the gateway asks the sentinel again.
    # (asked again while the sentinel answers that it cannot start one yet,
    # NOGOODSLAVE or INPROG, as on a loaded machine; dies with its last
    # answer after 30 s)
    Test::More::is(IdempotencyTest::switch_master(sentinel => $sentinel, old => $first_master, new => $replica,
                                                  within => 15), 'OK', "$key: the sentinel starts a failover");
    Test::More::is(IdempotencyTest::redis_command_at($replica, 'EXISTS', $rkey), 0, "$key: the new master has no claim");

    # Another request of the key, of another fingerprint: claims on the new master, executes, stores.
    my $other = IdempotencyTest::read_response(send_post($uri, $key, 'y'));
    Test::More::is($other->{status}, 201, "$key: the other request executes");
    Test::More::is($other->{headers}{'x-upstream-execution'}, 2, "$key: as the second execution");
    my $theirs = IdempotencyTest::wait_until(sub {
        my $v = IdempotencyTest::redis_command_at($replica, 'GET', $rkey);
        defined $v && substr($v, 0, 5) eq "IDM\x01\x02" ? $v : undef;
    }, 10) or die "$key: the other request's response was not stored on the new master $replica within 10 s\n";
    my $pttl_before = IdempotencyTest::redis_command_at($replica, 'PTTL', $rkey);
    # All of the above within the original's time at the upstream, or this
    # test proves nothing: say so rather than pass.
    my $took = time - $start;
    die sprintf("%s: the failover and the other request took %.1f s, too close to the original's %d s at the upstream\n",
                $key, $took, DELAY) if $took > DELAY - 0.5;
    Test::More::note(sprintf "%s: failover and the other request done %.1f s after the original started", $key, $took);

    # The original's response, stored within its lease, lands on the new master.
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, "$key: the original's client gets its response");
    Test::More::ok(logged('putting back what was there'), "$key: the overwritten response is put back");
    Test::More::ok(IdempotencyTest::wait_until(sub { (IdempotencyTest::redis_command_at($replica, 'GET', $rkey) // '') eq $theirs }, 5),
                   "$key: the other request's response is back on the new master");
    my $left = IdempotencyTest::redis_command_at($replica, 'PTTL', $rkey);
    Test::More::ok($left > HOUR_MS - 60_000 && $left <= $pttl_before,
                   "$key: with the life it had: $left ms left (had $pttl_before)");
    Test::More::is(IdempotencyTest::upstream_count($uri), 2, "$key: two executions");
}

__DATA__

=== TEST 1: Sentinel: the master fails over to a replica that missed the claim; another request of another fingerprint executes and stores; the original's store, within its lease, puts it back with the life it had; its retry replays
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_PORT;
map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 60s;
    idempotency_ttl 1h;
    proxy_pass http://backend$uri$delay_args;
}
--- init
main::failover_loses_the_claim('/lease/sentinel', 'lease-sentinel');
--- request
POST /lease/sentinel
y
--- more_headers
Idempotency-Key: lease-sentinel
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 2
--- response_body_like: "execution":2\b
--- error_log eval
qr/\[warn\] .*idempotency: Redis Sentinel: master "mymaster" is 127\.0\.0\.1:$main::replica, was 127\.0\.0\.1:$main::first_master$/
