# Live joining across gateways, through each Redis deployment the module
# speaks to: a duplicate on another gateway follows the live log the
# original appends to the store under its live key (the store key followed
# by the hex of the claim's token), through Redis Cluster (the live key on
# the master of its own slot), Sentinel (on the master it names) and TLS;
# with idempotency_encrypt_key nothing of the response rests in Redis in
# the clear, so the other gateway's duplicate does not join: it gets the
# stored response at the end (docs/design.md#live-join,
# docs/design.md#sealed-at-rest).
# Each original streams on the gateway under test, its duplicate joins on a
# second gateway (Idem::Nginx) with the same locations, one per deployment
# (one nginx of each for the whole file: the blocks after the first run on
# the first one's); the upstream runs once and a retry after the end is
# replayed.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks ();
use Idem::Live;
use Idem::Nginx ();
use Idem::Proc ();
use Test::Nginx::Socket 'no_plan';

# A master and a sentinel that names it (no replica: nothing fails over
# here, and a sentinel's replica takes seconds to be one it would promote).
sub sentinel_without_replica {
    my ($master, $sentinel) = map { Idem::Ports::free_port() } 1 .. 2;
    Idem::Redis::start_node($master, '--bind', '127.0.0.1', '--port', $master, '--save', '', '--appendonly', 'no');
    my $conf = Idem::RedisSentinel::write_conf($sentinel,
        "bind 127.0.0.1\nport $sentinel\nsentinel monitor mymaster 127.0.0.1 $master 1\n");
    Idem::Redis::start_node($sentinel, $conf, '--sentinel');
    IdempotencyTest::wait_until(sub {
        my $addr = eval { redis_command_at($sentinel, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'mymaster') };
        ref $addr eq 'ARRAY' && ($addr->[1] // '') eq $master;
    }) or die "the sentinel on $sentinel does not name the master $master\n";
    return ($sentinel, $master);
}

our @cluster = start_redis_cluster(3);
our ($sentinel, $sentinel_master) = sentinel_without_replica();
our $tls = tls_files();
our ($tls_plain, $tls_port) = start_redis_tls();

# The sealing key of the encryption block, for both gateways.
our $seal_key = Idem::Proc::tmpdir() . '/seal.key';
{
    open my $fh, '>', $seal_key or die "cannot write $seal_key: $!\n";
    print {$fh} "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
    close $fh;
}

# Each deployment: its location's store directives (the same on both
# gateways), and the plain ports of the Redis servers that may hold its keys.
our %deployments = (
    cluster  => [["idempotency_redis_cluster 127.0.0.1:$cluster[0] 127.0.0.1:$cluster[1]"], [@cluster]],
    sentinel => [["idempotency_redis_sentinel mymaster 127.0.0.1:$sentinel"], [$sentinel_master]],
    tls      => [["idempotency_redis 127.0.0.1:$tls_port ssl", "idempotency_redis_ssl_trusted_certificate $tls->{ca}"],
                 [$tls_plain]],
    plain    => [['idempotency_redis 127.0.0.1:' . redis_port()], [redis_port()]],
    sealed   => [['idempotency_redis 127.0.0.1:' . redis_port(), "idempotency_encrypt_key $seal_key"], [redis_port()]],
);

# The locations of both gateways: /deploy/NAME/ on each deployment's store.
sub locations {
    return join '', map {
        Idem::Blocks::location_conf("/deploy/$_/", 'idempotency on', @{ $deployments{$_}[0] }, 'idempotency_wait 10s',
                                    'proxy_buffering off', 'add_header X-Idempotency-Status $idempotency_status always',
                                    'proxy_pass http://backend')
    } sort keys %deployments;
}

sub port { IdempotencyTest::nginx_port() }

# The body of each original: 3 events.
sub events { join '', map { "id: $_\ndata: event $_ of 3\n\n" } 1 .. 3 }

# The live log keys of client key $key on deployment $name: [port, key]
# pairs, found with SCAN on each of its Redis servers.
sub live_keys {
    my ($name, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my @found;
    for my $at (@{ $deployments{$name}[1] }) {
        my $cursor = 0;
        for (1 .. 1000) {
            my ($next, $keys) = @{ IdempotencyTest::redis_command_at($at, 'SCAN', $cursor, 'MATCH', "$rkey*",
                                                                    'COUNT', 1000) };
            push @found, map { [$at, $_] } grep { /\A\Q$rkey\E[0-9a-f]+\z/ } @$keys;
            last if ($cursor = $next) == 0;
        }
    }
    return @found;
}

# The second gateway, on the same stores with the same locations (started
# by the first block that needs it, stopped by the last). It runs the
# nginx and the module under test (Idem::Nginx::nginx_beside_test).
our $other;
sub other_port {
    return $other->{port} if $other;
    $other = Idem::Nginx::nginx_beside_test('other', workers => 1,
        http => "upstream backend { server 127.0.0.1:$ENV{TEST_NGINX_UPSTREAM_PORT}; }",
        server => "server_name localhost;\n" . locations());
    return $other->{port};
}

sub stop_other { Idem::Nginx::nginx_stop($other) if $other }

# Runs $steps; a step that dies (a head that never comes, an event that
# never arrives) is a failed test, not the end of the file: the gate is
# opened to the end so that the original and its upstream finish.
sub guarded {
    my ($label, $gate, $steps) = @_;
    return if eval { $steps->(); 1 };
    my $error = $@;
    Test::More::fail("$label: $error");
    eval { Idem::Live::open_gate($gate, 99) };
}

# The original streams 3 events behind a gate on the gateway under test;
# while it runs its live log is in Redis, on the master of its key's slot;
# a duplicate on the other gateway joins it after event 1: the head and
# event 1 at once, event 2 as it comes, and the whole body; one execution.
sub joins_elsewhere {
    my ($name) = @_;
    my ($path, $key, $gate) = ("/deploy/$name/1", "deploy-$name", "deploy$name");
    my $uri = "$path?sse=3&gate=$gate";
    guarded($key, $gate, sub {
        my $original = Idem::Live::post(port(), $uri, $key);
        $original->body_has('event 1 of 3');
        my @live;
        IdempotencyTest::wait_until(sub { @live = live_keys($name, $key) }, 10);
        Test::More::is(scalar @live, 1, "$key: the original's live log is in Redis while it streams");
        if ($name eq 'cluster' && @live) {
            my ($owner) = IdempotencyTest::cluster_owner($live[0][1]);
            Test::More::is($live[0][0], $owner, "$key: ... on the master that serves the live key's slot");
            my ($store_owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key($key));
            Test::More::note("$key: the record is on $store_owner, the live log on $owner");
        }
        my $joiner = Idem::Live::post(other_port(), $uri, $key);
        my $head = $joiner->head(5);
        Test::More::is($head->{status}, 201, "$key: the joiner on the other gateway gets the status at once");
        Test::More::is($head->{headers}{'x-idempotency-status'}, 'joined', "$key: ... as joined");
        Test::More::is($head->{headers}{'idempotent-replayed'}, 'true', "$key: ... marked replayed");
        Test::More::is($head->{headers}{'content-type'}, 'text/event-stream', "$key: ... with the original's headers");
        Test::More::is($joiner->body_has('event 1 of 3', 5), "id: 1\ndata: event 1 of 3\n\n",
                       "$key: ... and event 1, sent before it came");
        Idem::Live::open_gate($gate, 2);
        $original->body_has('event 2 of 3');
        Test::More::unlike($joiner->body_has('event 2 of 3', 5), qr/event 3/,
                           "$key: the joiner gets event 2 as it comes, before event 3 exists");
        Idem::Live::open_gate($gate, 3);
        my $first = $original->finish;
        my $joined = $joiner->finish;
        Test::More::ok($first->{complete} && $joined->{complete}, "$key: both responses end whole");
        Test::More::is($joined->{body}, $first->{body}, "$key: the joiner gets the original's bytes");
        Test::More::is(IdempotencyTest::upstream_count($path), 1, "$key: the upstream ran once");
    });
}

# With idempotency_encrypt_key: while the original streams nothing of it
# is in Redis but its sealed claim (no live log key), so the duplicate on
# the other gateway waits and gets the stored response at the end.
sub waits_sealed {
    my ($path, $key, $gate) = ('/deploy/sealed/1', 'deploy-sealed', 'deploysealed');
    my $uri = "$path?sse=3&gate=$gate";
    guarded($key, $gate, sub {
        my $original = Idem::Live::post(port(), $uri, $key);
        $original->body_has('event 1 of 3');
        my $sets = sub { (IdempotencyTest::redis_command('INFO', 'commandstats') =~ /^cmdstat_set:calls=(\d+)/m)[0] // 0 };
        my $before = $sets->();
        my $joiner = Idem::Live::post(other_port(), $uri, $key);
        # its claim (SET NX GET) found the original's
        IdempotencyTest::wait_until(sub { $sets->() > $before }, 10)
            or die "the duplicate never reached Redis\n";
        Idem::Live::open_gate($gate, 2);
        $original->body_has('event 2 of 3');
        my @live = live_keys('sealed', $key);
        Test::More::is(scalar @live, 0, "$key: no live log in Redis while the sealed response streams");
        my $value = IdempotencyTest::redis_command('GET', IdempotencyTest::redis_key($key)) // '';
        Test::More::unlike($value, qr/event \d of 3/, "$key: nothing of it in the clear under its key");
        Idem::Live::open_gate($gate, 3);
        my $first = $original->finish;
        my $waited = $joiner->finish;
        Test::More::ok($first->{complete}, "$key: the original's response ends whole");
        Test::More::is($waited->{status}, 201, "$key: the duplicate gets the stored response");
        Test::More::is($waited->{headers}{'x-idempotency-status'}, 'waited', "$key: ... as waited, not joined");
        Test::More::is($waited->{body}, $first->{body}, "$key: ... byte for byte");
        Test::More::is(IdempotencyTest::upstream_count($path), 1, "$key: the upstream ran once");
    });
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: Redis Cluster: a duplicate on another gateway joins through the live key's master, then a retry is replayed
--- init
main::joins_elsewhere('cluster');
--- config eval
main::locations()
--- request
POST /deploy/cluster/1?sse=3&gate=deploycluster
x
--- more_headers
Idempotency-Key: deploy-cluster
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Content-Type: text/event-stream
--- response_body eval
main::events()


=== TEST 2: Redis Sentinel: a duplicate on another gateway joins through the master the sentinel names
--- init
main::joins_elsewhere('sentinel');
--- request
POST /deploy/sentinel/1?sse=3&gate=deploysentinel
x
--- more_headers
Idempotency-Key: deploy-sentinel
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Content-Type: text/event-stream
--- response_body eval
main::events()


=== TEST 3: Redis over TLS: a duplicate on another gateway joins through the TLS connection
--- init
main::joins_elsewhere('tls');
--- request
POST /deploy/tls/1?sse=3&gate=deploytls
x
--- more_headers
Idempotency-Key: deploy-tls
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Content-Type: text/event-stream
--- response_body eval
main::events()


=== TEST 4: without idempotency_encrypt_key the live log is in Redis while the response streams (TEST 5's contrast)
--- init
main::joins_elsewhere('plain');
--- request
POST /deploy/plain/1?sse=3&gate=deployplain
x
--- more_headers
Idempotency-Key: deploy-plain
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::events()


=== TEST 5: with idempotency_encrypt_key no live log rests in Redis: the other gateway's duplicate waits for the stored response
--- init
main::waits_sealed();
main::stop_other();
--- request
POST /deploy/sealed/1?sse=3&gate=deploysealed
x
--- more_headers
Idempotency-Key: deploy-sealed
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
--- response_body eval
main::events()
