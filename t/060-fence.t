# The fence (docs/design.md#the-fence): what the configuration may forward
# to the upstream about a request's claim. $idempotency_key_hash is the
# store key's hash of the virtual server, the scope and the key — the same
# key without the raw one; $idempotency_fence is a number the store draws
# with each claim of a key (microseconds by the store's clock), larger
# with each later claim of that key: after a release, after the claim was
# lost while its original still ran (the key deleted from Redis, as when
# Redis loses data), and for claims of one key in quick succession. The
# upstream (scripts/upstream.pl, echo=NAME) sends back what it received.
# Runs on Redis, on the zone store and on a Redis Cluster (the blocks
# marked --- redis_only only on one Redis).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location post);
use Test::Nginx::Socket 'no_plan';

use Time::HiRes qw(time);

master_on();
workers(2);
test_nginx_defaults();
run_tests();

# The location of every block: the claim's hash and fence forwarded.
sub fenced_location {
    return idem_location('idempotency_scope $http_x_tenant', 'proxy_set_header X-Fence $idempotency_fence',
                         'proxy_set_header X-Key-Hash $idempotency_key_hash', @_);
}

# The hash part of the store key of $key under $scope.
sub key_hash { substr(IdempotencyTest::redis_key($_[0], $_[1] // ''), length 'idem:') }

# The fence the upstream received for a response, checked to be a clock
# reading (microseconds since the epoch) taken between $from and now.
sub fence_of {
    my ($name, $res, $from) = @_;
    my $fence = $res->{headers}{'x-echo-x-fence'} // '';
    Test::More::like($fence, qr/\A[1-9][0-9]{15}\z/, "$name: the upstream got a fence: $fence");
    Test::More::ok($fence >= int(($from - 2) * 1e6) && $fence <= int((time + 2) * 1e6),
                   "$name: it is the store's clock at the claim");
    return $fence;
}

# A released answer (503), then a retry that executes: its claim's fence is larger.
sub after_release {
    my $from = time;
    my $first = post('/f/3?status=503&echo=X-Fence', 'fence-3');
    Test::More::is($first->{status}, 503, 'the first execution answers 503: the key is released');
    my $second = post('/f/3?echo=X-Fence', 'fence-3');
    Test::More::is(main::summary($second), '201 new 2', 'the retry executes again');
    Test::More::cmp_ok(fence_of('retry', $second, $from), '>', fence_of('first', $first, $from),
                       'the retry claim has the larger fence');
}

# Claims of one key in quick succession (each answered 503, so released at
# once): every fence is larger than the one before.
sub in_succession {
    my $from = time;
    my (@fences, @answers);
    for my $i (1 .. 12) {
        my $res = post('/f/4?status=503&echo=X-Fence', 'fence-4');
        push @fences, $res->{headers}{'x-echo-x-fence'} // 0;
        push @answers, "$res->{status}:" . ($res->{headers}{'x-idempotency-status'} // '-');
    }
    my @grow = grep { $fences[$_] > $fences[$_ - 1] } 1 .. $#fences;
    Test::More::is("@answers", join(' ', ('503:released') x 12), 'each claim after a release executes');
    Test::More::is(scalar @grow, $#fences, "each of 12 claims has a larger fence than the one before: @fences");
    Test::More::ok($fences[0] >= int(($from - 2) * 1e6), 'the first is a clock reading');
}

# The original's claim is lost while its upstream works (deleted from
# Redis); the retry executes a second time, and its fence is larger, so the
# upstream can tell the stale execution from the new one.
sub lost_claim {
    my $from = time;
    my $rkey = IdempotencyTest::redis_key('fence-5');
    my $original = IdempotencyTest::start_in_flight('/f/5?sleep=1&echo=X-Fence', 'fence-5');
    Test::More::is(IdempotencyTest::stored_kind($rkey), 'claim', 'the original holds the claim');
    IdempotencyTest::redis_command('DEL', $rkey);
    my $retry = post('/f/5?echo=X-Fence', 'fence-5');
    my $first = IdempotencyTest::read_response($original);
    Test::More::is(main::summary($retry), '201 new 2', 'the retry after the lost claim executes a second time');
    Test::More::cmp_ok(fence_of('retry', $retry, $from), '>', fence_of('original', $first, $from),
                       'the second execution has the larger fence');
}

# The commands of one new request and its store, by INFO commandstats.
sub commands_of {
    my ($uri, $key) = @_;
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    post($uri, $key)->{status} == 201 or die "POST $uri failed\n";
    IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq 'response' })
        or die "the response to $uri was not stored\n";
    my %calls = IdempotencyTest::redis_command('INFO', 'commandstats') =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    return \%calls;
}

sub summary { Idem::Blocks::summary(@_) }

__DATA__

=== TEST 1: the upstream gets the key's hash, the same as the store key's, each scope its own; a replay does not reach it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- request eval
["POST /f/1?echo=X-Key-Hash\nx", "POST /f/1?echo=X-Key-Hash\nx", "POST /f/1?echo=X-Key-Hash\nx", "GET /f/1?echo=X-Key-Hash"]
--- more_headers eval
["Idempotency-Key: fence-1\nX-Tenant: a", "Idempotency-Key: fence-1\nX-Tenant: a", "Idempotency-Key: fence-1\nX-Tenant: b", "Idempotency-Key: fence-1\nX-Tenant: a"]
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\nX-Echo-X-Key-Hash: " . main::key_hash('fence-1', 'a'),
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nX-Echo-X-Key-Hash: " . main::key_hash('fence-1', 'a'),
 "X-Idempotency-Status: new\nX-Upstream-Execution: 2\nX-Echo-X-Key-Hash: " . main::key_hash('fence-1', 'b'),
 "!X-Idempotency-Status\nX-Upstream-Execution: 3\nX-Echo-X-Key-Hash: -"]
--- no_error_log
[error]


=== TEST 2: a request the module passes through (GET) and one without a key get no fence and no hash
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- request eval
["GET /f/2?echo=X-Fence&echo=X-Key-Hash", "POST /f/2?echo=X-Fence&echo=X-Key-Hash\nx"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Echo-X-Fence: -\nX-Echo-X-Key-Hash: -", "X-Idempotency-Status: missing\nX-Echo-X-Fence: -\nX-Echo-X-Key-Hash: -"]
--- no_error_log
[error]


=== TEST 3: the retry of a released key executes with a larger fence
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- init
main::after_release();
--- request
GET /_health
--- error_code: 200
--- no_error_log
[error]


=== TEST 4: claims of one key in quick succession: each fence larger than the one before
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- init
main::in_succession();
--- request
GET /_health
--- error_code: 200
--- no_error_log
[error]


=== TEST 5: a claim lost while its original runs: the second execution has the larger fence
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- init
main::lost_claim();
--- request
GET /_health
--- error_code: 200


=== TEST 6: a claim draws the fence in the same step as the claim (one script), only where a fence is named
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::fenced_location()
--- init
my $calls = main::commands_of('/f/6', 'fence-6');
Test::More::is($calls->{eval} // 0, 1, 'fenced: the claim is one script');
Test::More::is($calls->{set} // 0, 2, 'the script\'s SET, and the store');
--- request
GET /_health
--- error_code: 200
--- no_error_log
[error]


=== TEST 7: ... and where the configuration names no fence, the claim stays a plain SET
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_scope ""', 'proxy_set_header X-Key-Hash $idempotency_key_hash')
--- init
my $calls = main::commands_of('/f/7', 'fence-7');
Test::More::is(($calls->{eval} // 0) + ($calls->{evalsha} // 0), 0, 'no script');
Test::More::is($calls->{set} // 0, 2, 'the claim and the store are two SETs');
--- request
GET /_health
--- error_code: 200
--- no_error_log
[error]
