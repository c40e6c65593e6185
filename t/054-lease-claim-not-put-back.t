# A store within the claim's lease (lease.hpp) that finds another
# request's claim under the key replaces it for good and does not put it
# back (docs/design.md#the-lease). Redis lost the first request's claim, so
# the second request executed: one extra execution, the most a loss may
# cost. Putting the second request's claim back would revive it after its
# own store had given up (it found the key taken), and its expiry would let
# a retry of it execute a third time.
#
# The run, with one worker (one pipelined Redis connection):
#   1. A (body "a") claims; its claim is lost (a DEL straight into Redis);
#   2. B (body "b", another fingerprint) claims and executes;
#   3. Redis writes are paused (CLIENT PAUSE ... WRITE); A's response (0.6 s)
#      leaves within A's lease: its store, MULTI ... SET XX GET ... EXEC,
#      waits in Redis's input buffer; B's response (2 s) leaves past B's
#      lease: its fenced store waits behind A's;
#   4. Redis resumes: A's store replaces B's claim, B's store finds A's
#      record and stores nothing — all before A could send a put-back.
# A's record must stay: a retry of B is answered 422 (another fingerprint)
# without executing, even once B's claim would have expired. Put back, B's
# claim expires on its own time, and the retry executes a third time.
#
# lock_ttl 5 s and redis_timeout 3 s: a lease of 5 - (3 + 0.5) = 1.5 s after
# the claim, renewals every 1.67 s. A stores before its first renewal (which
# would find its claim gone and send the store fenced); B stores past its
# lease. The pause (from before A's store until both clients have their
# responses) stays well below redis_timeout, after which the connection
# would be dropped.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

# A client's X-Delay header becomes the upstream's ?sleep=.
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('http_config', "idempotency_redis 127.0.0.1:\$TEST_NGINX_REDIS_PORT;\n"
        . 'map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }' . "\n");
});

run_tests();

# Sends POST $uri with $key and $body, slowed down at the upstream by
# $delay s (or not at all); returns its socket, once the upstream has
# started on it when $delay is given.
sub post {
    my ($uri, $key, $body, $delay) = @_;
    my $before = IdempotencyTest::upstream_count($uri);
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\n" . (defined $delay ? "X-Delay: $delay\r\n" : '')
        . "Content-Length: " . length($body) . "\r\n\r\n$body");
    if (defined $delay) {
        IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) > $before }, 10)
            or die "POST $uri ($body) never reached the upstream\n";
    }
    return $sock;
}

sub redis_now_ms {
    my $t = IdempotencyTest::redis_command('TIME');
    return $t->[0] * 1000 + int($t->[1] / 1000);
}

sub claim_taken {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $a = post($uri, $key, 'a', 0.6);
    IdempotencyTest::redis_command('DEL', $rkey) or die "$key: no claim of A's to lose\n";
    my $b = post($uri, $key, 'b', 2);
    (IdempotencyTest::stored_kind($rkey) // '') eq 'claim' or die "$key: B's claim is not under the key\n";
    # until when B's claim lived (by Redis's clock), had it been put back
    my $b_expiry = IdempotencyTest::redis_command('PEXPIRETIME', $rkey);
    IdempotencyTest::redis_command('CLIENT', 'PAUSE', 10_000, 'WRITE');
    my $ra = IdempotencyTest::read_response($a);
    my $rb = IdempotencyTest::read_response($b);
    IdempotencyTest::redis_command('CLIENT', 'UNPAUSE');
    Test::More::is($ra->{status}, 201, "$key: A's client gets its response");
    Test::More::is($rb->{status}, 201, "$key: B's client gets its response");
    Test::More::ok(IdempotencyTest::error_log_has('this response replaced that claim and stays', 5),
                   "$key: A's store says it replaced another request's claim, for good");
    Test::More::ok(IdempotencyTest::error_log_has('could not store the response', 5),
                   "$key: B's store finds the key taken");
    # past the moment B's claim, put back, would have expired
    IdempotencyTest::wait_until(sub { redis_now_ms() > $b_expiry + 100 }, 10)
        or die "$key: Redis's clock never passed $b_expiry\n";
    Test::More::is(IdempotencyTest::stored_kind($rkey), 'response', "$key: the key holds a response, not B's claim");
    Test::More::like(IdempotencyTest::redis_command('GET', $rkey) // '', qr/"execution":1\b/,
                     "$key: A's response");
    my $left = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok($left > 3_600_000 - 60_000, "$key: it lives idempotency_ttl: $left ms left");
    my $rc = IdempotencyTest::read_response(post($uri, $key, 'b'));
    Test::More::is($rc->{status}, 422, "$key: a retry of B is answered 422, not executed");
}

__DATA__

=== TEST 1: Redis: the claim lost mid-request, another request claims and executes; the original's store within its lease replaces that claim for good: a retry of the other request is not executed a third time
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 5s', 'idempotency_redis_timeout 3s',
                    'idempotency_ttl 1h', 'proxy_pass http://backend$uri$delay_args')
--- init
main::claim_taken('/taken/claim', 'taken-claim');
--- request
GET /_count/taken/claim
--- response_body: 2
--- error_log
Redis lost the claim on
could not store the response: the claim had expired or was taken over
--- no_error_log
putting back
