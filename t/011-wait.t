# idempotency_wait: a duplicate of an in-flight original waits for it, then
# gets the replay ($idempotency_status "waited"); when the wait runs out it
# gets 409; when the original is released (5xx) the duplicate executes
# (docs/design.md#in-flight).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

# A duplicate POST of $uri with $key (and $headers), on a connection of its own.
sub send_duplicate {
    my ($uri, $key, $headers) = @_;
    return IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                                         . ($headers // '') . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx");
}

# $n duplicates of an in-flight original all wait for it, and each gets
# its response.
sub waiters_get_the_response {
    my ($uri, $key, $n) = @_;
    my $original = IdempotencyTest::start_in_flight($uri, $key);
    my @waiters = map { send_duplicate($uri, $key) } 1 .. $n;
    my @responses = map { IdempotencyTest::read_response($_) } @waiters;
    my $first = IdempotencyTest::read_response($original);
    Test::More::is($first->{status}, 201, "$key: the original gets its response");
    my $replayed = grep {
        $_->{status} == 201 && ($_->{headers}{'x-idempotency-status'} // '') eq 'waited'
            && ($_->{headers}{'x-upstream-execution'} // '') eq '1' && $_->{body} eq $first->{body}
    } @responses;
    Test::More::is($replayed, $n, "$key: every waiter gets the original's response, byte for byte");
}

# ... and on Redis together they cost it their own first claim each plus the
# few looks their group makes: at most 2 commands per waiter, where a look of
# its own every 25-500 ms cost each of them about 8 over 2 s. (A zone has no
# commands to count: there the waiters only get the response.)
sub waiters_share_looks {
    my ($uri, $key, $n) = @_;
    return waiters_get_the_response($uri, $key, $n) if Idem::Store::on_zone();
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    waiters_get_the_response($uri, $key, $n);
    my %calls = IdempotencyTest::redis_command('INFO', 'commandstats') =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    my $total = 0;
    $total += $_ for values %calls;
    my $of_waiters = $total - 2;  # the original's claim and its store
    Test::More::ok($of_waiters <= 2 * $n, "$key: $of_waiters Redis commands for $n waiters, at most 2 each");
}

# Two duplicates in one group whose waits end on either side of the
# original's end: the first gets 409 after a last look, the second the replay.
sub waits_end_apart {
    my ($uri, $key) = @_;
    my $original = IdempotencyTest::start_in_flight($uri, $key);
    my $first = send_duplicate($uri, $key);
    sleep 1;  # the second comes a second later, so its wait ends a second later
    my $second = send_duplicate($uri, $key);
    my $res = IdempotencyTest::read_response($first);
    Test::More::is($res->{status}, 409, "$key: the wait that ends before the original gets 409");
    Test::More::is($res->{headers}{'x-idempotency-status'}, 'conflict', "$key: ... counted as conflict");
    $res = IdempotencyTest::read_response($second);
    Test::More::is($res->{status}, 201, "$key: the wait that ends after the original gets its response");
    Test::More::is($res->{headers}{'x-idempotency-status'}, 'waited', "$key: ... counted as waited");
    IdempotencyTest::read_response($original);
}

# The original is released (503) while $n duplicates wait; each waiter in
# turn is granted the key and executes, on a route whose upstream refuses
# the connection, so it is released again at once and wakes the next.
sub released_in_turn {
    my ($uri, $key, $n) = @_;
    my $original = IdempotencyTest::start_in_flight($uri, $key);
    my @waiters = map { send_duplicate($uri, $key, "X-Route: dead\r\n") } 1 .. $n;
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 503, "$key: the original gets its 503");
    my $released = grep {
        my $res = IdempotencyTest::read_response($_);
        $res->{status} == 502 && ($res->{headers}{'x-idempotency-status'} // '') eq 'released'
    } @waiters;
    Test::More::is($released, $n, "$key: every waiter executes in turn and is released");
}

# Redis stalls (CLIENT PAUSE, 1.6 idempotency_redis_timeout) while $n
# duplicates wait: their group's look meets the stall and misses its
# timeout; none of them gets 503 for it, their waits not being over: they
# wait on and get the original's response.
sub waiters_outlive_a_stall {
    my ($uri, $key, $n) = @_;
    my $original = IdempotencyTest::start_in_flight($uri, $key);
    my $sets = sub { (IdempotencyTest::redis_command('INFO', 'commandstats') =~ /^cmdstat_set:calls=(\d+)/m)[0] // 0 };
    my $before = $sets->();
    my @waiters = map { send_duplicate($uri, $key) } 1 .. $n;
    IdempotencyTest::wait_until(sub { $sets->() >= $before + $n })
        or die "$key: the duplicates' claims never reached Redis\n";
    IdempotencyTest::redis_command('CLIENT', 'PAUSE', 800, 'ALL');
    my @responses = map { IdempotencyTest::read_response($_) } @waiters;
    my $first = IdempotencyTest::read_response($original);
    Test::More::is($first->{status}, 201, "$key: the original gets its response");
    Test::More::is(join(' ', map { "$_->{status} " . ($_->{headers}{'x-idempotency-status'} // '-') } @responses),
                   join(' ', ('201 waited') x $n), "$key: every waiter waits through the stall and gets it");
    Test::More::ok(IdempotencyTest::error_log_has('did not answer a look for waiting requests'),
                   "$key: the look that met the stall timed out");
}

run_tests();

__DATA__

=== TEST 1: a duplicate waits for the original and gets its response, woken when the original settles in its worker
--- init
our $original = IdempotencyTest::start_in_flight('/wait/1?sleep=1', 'wait-1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 5s')
--- request
POST /wait/1?sleep=1
x
--- more_headers
Idempotency-Key: wait-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: waited
--- response_body_like: "execution":1,
--- error_log
waiting for the original of
is settled: its waiters look now


=== TEST 2: when the wait runs out the duplicate gets 409 with Retry-After
--- init
our $original = IdempotencyTest::start_in_flight('/wait/2?sleep=3', 'wait-2');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 300ms')
--- request
POST /wait/2?sleep=3
x
--- more_headers
Idempotency-Key: wait-2
--- error_code: 409
--- response_headers
Retry-After: 1
Content-Type: application/problem+json
X-Idempotency-Status: conflict


=== TEST 3: when the original is released by a 5xx the waiting duplicate executes
--- init
our $original = IdempotencyTest::start_in_flight('/wait/3?sleep=1&status=503', 'wait-3');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 5s')
--- request
POST /wait/3?sleep=1&status=503
x
--- more_headers
Idempotency-Key: wait-3
--- error_code: 503
--- response_headers
X-Upstream-Execution: 2
X-Idempotency-Status: released


=== TEST 4: twenty duplicates waiting for one original all get its response; on Redis they share its looks: at most 2 commands each
--- init
main::waiters_share_looks('/wait/4?sleep=2', 'wait-4', 20);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 10s')
--- request
POST /wait/4?sleep=2
x
--- more_headers
Idempotency-Key: wait-4
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: replayed


=== TEST 5: in one group, a wait that runs out before the original ends gets 409, a later one the replay
--- init
main::waits_end_apart('/wait/5?sleep=2', 'wait-5');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 1500ms')
--- request
POST /wait/5?sleep=2
x
--- more_headers
Idempotency-Key: wait-5
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: replayed


=== TEST 6: released in turn: each waiter granted the key executes, its refused upstream releases it, the next waiter goes on
--- init
main::released_in_turn('/wait/7?sleep=1&status=503', 'wait-7', 5);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
map $http_x_route $route {
    default backend;
    dead    127.0.0.1:1;
}
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_wait 10s',
                    'add_header X-Idempotency-Status $idempotency_status always',
                    'proxy_pass http://$route')
--- request
POST /wait/7?status=503
x
--- more_headers
Idempotency-Key: wait-7
--- error_code: 503
--- response_headers
X-Upstream-Execution: 2
X-Idempotency-Status: released


=== TEST 7: a look that misses idempotency_redis_timeout in a Redis stall costs no waiter its wait: they wait on and get the response
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 10s', 'idempotency_redis_timeout 500ms') . main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::waiters_outlive_a_stall('/stall/1?sleep=2', 'stall-1', 5);
--- request
GET /_count/stall/1
--- response_body: 1
--- timeout: 20
