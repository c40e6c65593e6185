# Each Redis connection writes as its server can (docs/design.md#conditional-writes).
# A server with `SET ... IFEQ` (Valkey 8.1, Redis 8.4) has the response
# stored, the claim renewed, by one plain command the server runs only while
# the key holds the claim: no lease, no script, no put-back; one with a
# conditional delete (`DELIFEQ`, Valkey 9.0; `DELEX ... IFEQ`, Redis 8.4)
# has the key released by it. Elsewhere (Redis 7 and 8.0 among them) the
# lease and the fenced scripts stay as they were (t/044, t/047).
#
# What the test Redis runs is asked of it directly, by sending it the
# commands (not from its version): each block checks, in Redis's own
# counters (INFO commandstats), that the gateway used the words the server
# has — and the same outcome either way:
#   TEST 1  a new key: 2 commands (claim, store) where SET IFEQ exists; the
#           claim, then MULTI; PEXPIRETIME; SET; EXEC elsewhere;
#   TEST 2  the claim lost while the upstream runs, and another request of
#           another fingerprint stored meanwhile: the original's store
#           leaves that response as it was (refused by the server, or
#           overwritten and put back with its life);
#   TEST 3  a claim renewed while a slow upstream runs: by SET IFEQ (no
#           script at all) where it exists;
#   TEST 4  a key released (the upstream could not be reached): by the
#           conditional delete where it exists, else the script; the key
#           is gone either way;
#   TEST 5  a new key on a Redis Cluster: each node's connection learned
#           what its server runs, and the key's master was written so;
#   TEST 6  a new connection loads the scripts before anything it carries:
#           on a Redis whose script cache was flushed, a release by script
#           meets no NOSCRIPT (which would send it again after the answer
#           went out), and a retry sent at once executes again.
# `make test` runs it against the machine's Redis; TEST_REDIS_SERVER (a
# path to another redis-server or valkey-server) against another.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

start_redis_cluster(3);

test_nginx_defaults();

add_block_preprocessor(sub {
    my $block = shift;
    my $store = $block->http_config // "idempotency_redis 127.0.0.1:\$TEST_NGINX_REDIS_PORT;\n";
    $block->set_value('http_config', $store
        . 'map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }' . "\n");
});

run_tests();

use constant HOUR_MS => 3_600_000;

# What the test Redis runs, asked of it: a syntax error (or an unknown
# command) says it does not.
my %runs;
sub runs {
    my ($what) = @_;
    return $runs{$what} //= do {
        my @probe = $what eq 'set_ifeq' ? ('SET', 'idem-probe', 'v', 'IFEQ', 'x')
                  : $what eq 'delifeq'  ? ('DELIFEQ', 'idem-probe', 'x')
                  :                       ('DELEX', 'idem-probe', 'IFEQ', 'x');
        my $ok = eval { IdempotencyTest::redis_command(@probe); 1 } ? 1 : 0;
        Test::More::note("the test Redis " . ($ok ? 'runs' : 'does not run') . " @probe[0 .. 1]: " . ($@ || 'ok'));
        $ok;
    };
}

sub conditional_delete { runs('delifeq') || runs('delex') }

sub delayed_location {
    location_conf('/', 'idempotency on', @_, 'proxy_pass http://backend$uri$delay_args');
}

sub commands {
    my ($at) = @_;
    my $stats = $at ? IdempotencyTest::redis_command_at($at, 'INFO', 'commandstats')
                    : IdempotencyTest::redis_command('INFO', 'commandstats');
    my %calls = $stats =~ /^cmdstat_([\w|]+):calls=(\d+)/mg;
    return \%calls;
}

sub scripts { my ($c) = @_; ($c->{evalsha} // 0) + ($c->{eval} // 0) }

sub post {
    my ($uri, $key, $body, @headers) = @_;
    return IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\n" . join('', map { "$_\r\n" } @headers)
        . 'Content-Length: ' . length($body) . "\r\n\r\n$body");
}

sub stored_record {
    my ($rkey) = @_;
    return IdempotencyTest::wait_until(sub {
        my $v = IdempotencyTest::redis_command('GET', $rkey);
        defined $v && (IdempotencyTest::stored_kind($rkey) // 'claim') ne 'claim' ? $v : undef;
    }, 10);
}

# A new key through the test Redis, or ($at) the Cluster node that owns it.
sub new_key {
    my ($uri, $key, $at) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    IdempotencyTest::redis_command_at($at // IdempotencyTest::redis_port(), 'CONFIG', 'RESETSTAT');
    my $res = IdempotencyTest::read_response(post($uri, $key, 'x'));
    Test::More::is($res->{status}, 201, "$key: executed");
    IdempotencyTest::wait_until(sub {
        (IdempotencyTest::stored_kind($rkey, $at // IdempotencyTest::redis_port()) // "claim") ne "claim" }, 10)
        or die "$key: nothing stored\n";
    my $c = commands($at);
    if (runs('set_ifeq')) {
        Test::More::is($c->{set}, 2, "$key: the claim and the store are two SETs");
        Test::More::is(scripts($c) + ($c->{multi} // 0) + ($c->{exec} // 0) + ($c->{pexpiretime} // 0), 0,
                       "$key: and nothing else: no script, no transaction");
    } else {
        Test::More::is($c->{set}, 2, "$key: the claim and the leased store are two SETs");
        Test::More::is(($c->{multi} // 0) . '/' . ($c->{pexpiretime} // 0) . '/' . ($c->{exec} // 0), '1/1/1',
                       "$key: the store went within the claim's lease");
        Test::More::is(scripts($c), 0, "$key: no script");
    }
}

# The original's claim is replaced by another request's stored response of
# another fingerprint while the upstream runs (as when Redis lost the claim
# and another request claimed, executed and stored).
sub claim_lost {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $before = IdempotencyTest::upstream_count($uri);
    my $original = post($uri, $key, 'x', 'X-Delay: 2');
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) > $before }, 10)
        or die "the original never reached the upstream\n";
    IdempotencyTest::redis_command('DEL', $rkey) or die "no claim under $rkey\n";
    Test::More::is(IdempotencyTest::read_response(post($uri, $key, 'y'))->{status}, 201,
                   "$key: another request of another fingerprint executes");
    my $theirs = stored_record($rkey) or die "$key: the other request's response was not stored\n";
    my $pttl = IdempotencyTest::redis_command('PTTL', $rkey);
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, "$key: the original's client gets its response");
    Test::More::ok(IdempotencyTest::error_log_has(runs('set_ifeq') ? 'could not store the response' : 'putting back what was there'),
                   "$key: the original's store " . (runs('set_ifeq') ? 'is refused by the server' : 'puts back what it overwrote'));
    Test::More::ok(IdempotencyTest::wait_until(sub { (IdempotencyTest::redis_command('GET', $rkey) // '') eq $theirs }, 5),
                   "$key: the other request's response is there");
    my $left = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok($left > HOUR_MS - 60_000 && $left <= $pttl, "$key: with the life it had: $left ms left (had $pttl)");
    my $c = commands();
    Test::More::is(scripts($c) + ($c->{exec} // 0), 0, "$key: the server's conditional write, no script, no transaction")
        if runs('set_ifeq');
    Test::More::is(IdempotencyTest::upstream_count($uri), $before + 2, "$key: two executions");
}

# lock_ttl 1500ms: renewals every 500 ms while the upstream works 2 s.
sub renewed {
    my ($uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    my $res = IdempotencyTest::read_response(post($uri, $key, 'x', 'X-Delay: 2'));
    Test::More::is($res->{status}, 201, "$key: executed, past lock_ttl: the claim was renewed");
    stored_record($rkey) or die "$key: nothing stored\n";
    my $c = commands();
    if (runs('set_ifeq')) {
        Test::More::ok($c->{set} >= 4, "$key: the claim, renewals and the store are SETs ($c->{set})");
        Test::More::is(scripts($c), 0, "$key: no script");
    } else {
        Test::More::ok(scripts($c) >= 2, "$key: renewed by the script (" . scripts($c) . ')');
    }
}

sub released {
    my ($uri, $key) = @_;
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    my $res = IdempotencyTest::read_response(post($uri, $key, 'x'));
    Test::More::is($res->{status}, 502, "$key: the upstream could not be reached");
    my $rkey = IdempotencyTest::redis_key($key);
    Test::More::ok(IdempotencyTest::wait_until(sub { !defined IdempotencyTest::redis_command('GET', $rkey) }, 5),
                   "$key: the key is released");
    my $c = commands();
    if (conditional_delete()) {
        Test::More::is(($c->{delifeq} // 0) + ($c->{delex} // 0), 1, "$key: by the server's conditional delete");
        Test::More::is(scripts($c), 0, "$key: no script");
    } else {
        Test::More::ok(scripts($c) >= 1, "$key: by the script (EVALSHA, or EVAL after NOSCRIPT)");
    }
}

# A key released (503) on a fresh connection to a Redis without scripts.
sub released_fresh {
    my ($uri, $key) = @_;
    my $res = IdempotencyTest::read_response(post($uri, $key, 'x'));
    Test::More::is($res->{status}, 503, "$key: answered 503, the key released");
    my $errors = IdempotencyTest::redis_command('INFO', 'errorstats');
    Test::More::unlike($errors, qr/errorstat_NOSCRIPT/, "$key: no command met NOSCRIPT");
    Test::More::ok(commands()->{'script|load'} >= 4, "$key: the connection loaded the scripts");
}

__DATA__

=== TEST 1: a new key: two commands where the server has SET IFEQ, else the leased store; its retry replays
--- config eval
main::delayed_location()
--- init
main::new_key('/cw/new', 'cw-new');
--- request
POST /cw/new
x
--- more_headers
Idempotency-Key: cw-new
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- no_error_log
[error]


=== TEST 2: the claim lost while the upstream runs, another fingerprint stored meanwhile: the original's store leaves that response as it was
--- config eval
main::delayed_location('idempotency_lock_ttl 10s', 'idempotency_ttl 1h')
--- init
main::claim_lost('/cw/lost', 'cw-lost');
--- request
POST /cw/lost
y
--- more_headers
Idempotency-Key: cw-lost
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body_like: "execution":2\b


=== TEST 3: a claim renewed while a slow upstream runs: by SET IFEQ where the server has it
--- config eval
main::delayed_location('idempotency_lock_ttl 1500ms')
--- init
main::renewed('/cw/renew', 'cw-renew');
--- request
POST /cw/renew
x
--- more_headers
Idempotency-Key: cw-renew
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- no_error_log
could not renew


=== TEST 4: a key released when the upstream cannot be reached: by the server's conditional delete where it has one
--- config
location / {
    idempotency on;
    proxy_pass http://127.0.0.1:1;
}
--- init
main::released('/cw/release', 'cw-release');
--- request
POST /cw/release
x
--- more_headers
Idempotency-Key: cw-release
--- error_code: 502
--- no_error_log
could not release


=== TEST 5: Cluster: a new key written on its master as that server can
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_2;
--- config eval
main::delayed_location()
--- init
main::new_key('/cw/cluster', 'cw-cluster', (IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cw-cluster')))[0]);
--- request
POST /cw/cluster
x
--- more_headers
Idempotency-Key: cw-cluster
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- no_error_log
[error]


=== TEST 6: a new connection loads the scripts first: a release meets no NOSCRIPT, and a retry sent at once executes again
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- init
IdempotencyTest::redis_command('SCRIPT', 'FLUSH');
IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
main::released_fresh('/cw/fresh?status=503', 'cw-fresh');
--- request
POST /cw/fresh?status=503
x
--- more_headers
Idempotency-Key: cw-fresh
--- error_code: 503
--- response_headers
X-Upstream-Execution: 2
