# A full Redis never executes a request twice. With maxmemory and
# maxmemory-policy noeviction, a flood of new keys fills Redis while a
# request is in flight; its store is refused (OOM). Extending a key's TTL
# needs no memory, so the claim is kept for idempotency_ttl: retries get
# 503 while Redis is full (it refuses their claims too) or 409, while the
# store is tried again (for at least 20 s) and after it gives up; once
# memory is freed a retry gets 409 and still does not execute the request
# again. The refusal is logged (error) and counted.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time sleep);

test_nginx_defaults();
run_tests();

sub metric {
    my ($name) = @_;
    my $sock = IdempotencyTest::send_request("GET /metrics HTTP/1.0\r\n\r\n");
    my $page = do { local $/; <$sock> } // '';
    return $page =~ /^\Q$name\E (\d+)$/m ? $1 : 'absent';
}

# Fills Redis with keys of 10 kB (at most 2000, for at most 10 s) until it
# answers OOM; returns how many it took.
sub flood {
    my $value = 'f' x 10_000;
    my $deadline = time + 10;
    for my $i (1 .. 2000) {
        last if time > $deadline;
        my $ok = eval { IdempotencyTest::redis_command('SET', "flood:$i", $value); 1 };
        return $i if !$ok && $@ =~ /OOM/;
        die "flood: $@" unless $ok;
    }
    die "Redis never filled up\n";
}

sub full_redis {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    my ($used) = IdempotencyTest::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', $used + 2_000_000);

    my $before = IdempotencyTest::upstream_count($uri);
    my $sock = IdempotencyTest::send_request("POST $uri?sleep=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx");
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) > $before }, 10)
        or die "the original never reached the upstream\n";
    my $keys = flood();
    # Full it stays: the test's own connections, whose buffers Redis frees
    # as they close, must not leave room for the store.
    my ($full) = IdempotencyTest::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', $full - 65_536);
    Test::More::ok($keys > 1, "a flood of $keys new keys filled Redis while the request was in flight");
    Test::More::is(IdempotencyTest::read_response($sock)->{status}, 201, 'the original is answered');
    Test::More::ok(IdempotencyTest::error_log_has('is out of memory and refused the response'), 'the refusal is logged');
    my $pttl = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok($pttl > 3_000_000, "the claim is kept for idempotency_ttl: $pttl ms left");
    my $retry = IdempotencyTest::nginx_post("$uri?sleep=1", $key);
    Test::More::ok($retry == 409 || $retry == 503, "a retry meanwhile gets 409, or 503 while Redis is full: $retry");
    Test::More::ok(IdempotencyTest::error_log_has('gave up trying to store the response', 30), 'the store gives up (its window: 20 s)');
    Test::More::is(IdempotencyTest::stored_kind($rkey), 'claim', 'the claim stays');
    Test::More::ok(IdempotencyTest::redis_command('PTTL', $rkey) > 3_000_000, 'for idempotency_ttl');
    for my $i (1 .. $keys) {
        IdempotencyTest::redis_command('DEL', "flood:$i");
    }
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', 0);
    sleep 1.5;  # past idempotency_lock_ttl: a claim only renewed by the store's attempts would be gone now
    Test::More::is(metric('idempotency_redis_stores_out_of_memory_total'), 1, 'counted');
    Test::More::is(IdempotencyTest::upstream_count($uri), 1, 'the upstream ran once');
}

__DATA__

=== TEST 1: Redis full (noeviction): the store refused for memory keeps the claim; after memory is freed a retry gets 409, the upstream ran once
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 1s;
    idempotency_ttl 1h;
    proxy_pass http://backend;
}
location = /metrics {
    idempotency_metrics;
}
--- init
main::full_redis('/full/1', 'full-1');
--- request
POST /full/1?sleep=1
x
--- more_headers
Idempotency-Key: full-1
--- error_code: 409
--- error_log
is out of memory and refused the response for
the claim on
stays until idempotency_ttl: its retries get 409, never a second execution
--- timeout: 10
