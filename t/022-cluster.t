# idempotency_redis_cluster: every key goes to the master of its slot,
# found with CLUSTER SLOTS; MOVED and ASK are followed; a master that fails
# over to its replica is followed without a reload. The cluster (3 masters,
# each with a replica) runs on loopback ports started here.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

our @nodes = start_redis_cluster(3, 1);
our @masters = @nodes[0 .. 2];

# The number of times each master answered with error $kind (MOVED, ASK).
sub main::errors {
    my ($kind) = @_;
    my %n;
    for my $port (@nodes) {
        my $stats = eval { redis_command_at($port, 'INFO', 'errorstats') } // '';
        $n{$port} = $stats =~ /errorstat_$kind:count=(\d+)/ ? $1 : 0;
    }
    return \%n;
}

sub main::sum { my $t = 0; $t += $_ for values %{ $_[0] }; $t }

# The nodes that serve and hold the record of client key $key (the others,
# replicas included, answer MOVED), as a list of ports.
sub main::holders {
    my ($key) = @_;
    my $rkey = redis_key($key);
    return join ',', grep { eval { redis_command_at($_, 'EXISTS', $rkey) } } @nodes;
}

# Moves the (empty) slot of $key to another master at once, on every node.
sub main::move_slot {
    my ($key) = @_;
    my ($from, $slot) = cluster_owner(redis_key($key));
    my ($to) = grep { $_ != $from } @masters;
    Idem::RedisCluster::give_slot($slot, $to, @masters);
    return ($from, $to);
}

our @keys = map { "spread-$_" } 1 .. 30;

# A key served by another master than cluster-down's (whole slot ranges fail
# over together, so this stays true after TEST 9).
our $down_owner = (cluster_owner(redis_key('cluster-down')))[0];
our ($up_key) = grep { (cluster_owner(redis_key($_)))[0] != $down_owner } map { "cluster-up-$_" } 1 .. 50;

# What one block's --- init hands to the next. Test::Nginx evaluates --- init
# in its own package (Test::Nginx::Util), so these are named in full.
our $moved_total_before;          # TEST 3 -> 4: MOVED answers before the 31 requests
our ($moved_from, $moved_to);     # TEST 5 -> 6: the slot of cluster-moved went from, to
our $moved_before;                # TEST 5 -> 6: MOVED answers per node before
our @ask;                         # TEST 7 -> 8: migrating node, importing node, slot
our $ask_before;                  # TEST 7 -> 8: ASK answers per node before
our $down;                        # TEST 10 -> 11: the master that was stopped

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a key is claimed, stored and replayed through the cluster
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_2;
--- config eval
main::idem_location()
--- request eval
["POST /cluster/1\nx", "POST /cluster/1\nx"]
--- more_headers
Idempotency-Key: cluster-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 2: the record is on the master that serves its slot
--- init
my ($owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cluster-1'));
Test::More::is(main::holders('cluster-1'), $owner, 'TEST 2: the master of the slot holds the record');
--- request
POST /cluster/1
x
--- more_headers
Idempotency-Key: cluster-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1


=== TEST 3: keys go straight to their slot's master: 30 keys, no MOVED once the map is known
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_3;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- init
$main::moved_total_before = main::sum(main::errors('MOVED'));
--- request eval
[map { "POST /spread/$_\nx" } 0 .. 30]
--- more_headers eval
["Idempotency-Key: warm-up", map { "Idempotency-Key: $_" } @main::keys]
--- error_code eval
[(201) x 31]
--- no_error_log
[error]


=== TEST 4: ... each master got some of the keys, and at most the first request met MOVED
--- init
my $moved = main::sum(main::errors('MOVED')) - $main::moved_total_before;
Test::More::ok($moved <= 2, "TEST 4: MOVED answers while routing 31 requests: $moved");
my %per_master;
for my $key (@main::keys) {
    my ($owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key($key));
    $per_master{$owner}++;
    Test::More::ok(main::holders($key) =~ /\b$owner\b/, "TEST 4: $key is on $owner");
}
Test::More::is(scalar keys %per_master, 3, 'TEST 4: the keys are spread over the 3 masters');
--- request
POST /spread/1
x
--- more_headers
Idempotency-Key: spread-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true


=== TEST 5: a slot moved to another master: MOVED is followed and the map refreshed
--- init
($main::moved_from, $main::moved_to) = main::move_slot('cluster-moved');
$main::moved_before = main::errors('MOVED');
--- request eval
["POST /moved\nx", "POST /moved\nx"]
--- more_headers
Idempotency-Key: cluster-moved
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 6: ... the record is on the new master; the old one said MOVED once, not again after the refresh
--- init
my $to = $main::moved_to;
my $from = $main::moved_from;
my $moved = main::errors('MOVED')->{$from} - $main::moved_before->{$from};
Test::More::is($moved, 1, "TEST 6: $from answered MOVED once");
Test::More::is(main::holders('cluster-moved'), $to, "TEST 6: the record is on $to");
--- request
POST /moved
x
--- more_headers
Idempotency-Key: cluster-moved
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1


=== TEST 7: a slot being migrated: the key is claimed and stored on the importing node after ASK
--- init
my ($from, $slot) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cluster-ask'));
my ($to) = grep { $_ != $from } @main::masters;
IdempotencyTest::redis_command_at($to, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING',
                                  IdempotencyTest::redis_command_at($from, 'CLUSTER', 'MYID'));
IdempotencyTest::redis_command_at($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING',
                                  IdempotencyTest::redis_command_at($to, 'CLUSTER', 'MYID'));
@main::ask = ($from, $to, $slot);
$main::ask_before = main::errors('ASK');
--- request eval
["POST /ask\nx", "POST /ask\nx"]
--- more_headers
Idempotency-Key: cluster-ask
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 8: ... the record is on the importing node, the migrating one answered ASK; the migration ends
--- init
my ($from, $to, $slot) = @main::ask;
my $asks = main::errors('ASK')->{$from} - $main::ask_before->{$from};
Test::More::ok($asks >= 3, "TEST 8: $from answered ASK for the claim, the store and the replay: $asks");
# a migrating node answers ASK for the keys it no longer has
my $on_from = eval { IdempotencyTest::redis_command_at($from, 'EXISTS', IdempotencyTest::redis_key('cluster-ask')) };
Test::More::like($@, qr/\bASK $slot\b/, "TEST 8: the migrating node $from does not have the record");
Idem::RedisCluster::give_slot($slot, $to, @main::masters);
Test::More::is(main::holders('cluster-ask'), $to, "TEST 8: the importing node $to has it");
--- request
POST /ask
x
--- more_headers
Idempotency-Key: cluster-ask
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1


=== TEST 9: a master fails over to its replica (CLUSTER FAILOVER): the stored response is replayed from the new master
--- init
my ($owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cluster-1'));
my ($replica) = grep {
    my $role = IdempotencyTest::redis_command_at($_, 'ROLE');
    $role->[0] eq 'slave' && $role->[2] == $owner
} @main::nodes;
# the replica has everything its master acknowledged before it takes over
IdempotencyTest::replica_caught_up($owner, $replica) or die "the replica of $owner did not catch up\n";
IdempotencyTest::redis_command_at($replica, 'CLUSTER', 'FAILOVER');
IdempotencyTest::wait_until(sub { IdempotencyTest::redis_command_at($replica, 'ROLE')->[0] eq 'master' }, 20)
    or die "the replica $replica did not take over\n";
--- request eval
["POST /cluster/1\nx", "POST /cluster/failover\nx"]
--- more_headers eval
["Idempotency-Key: cluster-1", "Idempotency-Key: cluster-failover"]
--- error_code eval
[201, 201]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", "!Idempotent-Replayed\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 10: a master is stopped: its keys get 503 until its replica takes over, the others are served throughout
--- init
my ($owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cluster-down'));
$main::down = $owner;
IdempotencyTest::cluster_node_stop($owner);
--- request eval
["POST /down\nx", "POST /up\nx"]
--- more_headers eval
["Idempotency-Key: cluster-down", "Idempotency-Key: $main::up_key"]
--- error_code eval
[503, 201]
--- response_headers eval
["Retry-After: 1", "X-Upstream-Execution: 1"]


=== TEST 11: ... once its replica has taken over, the keys of the stopped master are served again, no reload
--- init
my $stopped = $main::down;
IdempotencyTest::wait_until(sub {
    my $slots = eval { IdempotencyTest::redis_command_at($main::masters[0] == $stopped ? $main::masters[1] : $main::masters[0],
                                                         'CLUSTER', 'SLOTS') } || [];
    !grep { $_->[2][1] == $stopped } @$slots;
}, 30) or die "no replica took over from $stopped\n";
# The gateway answers for the new master's keys (it looks the map up again
# while a master is unreachable); probes with other keys of that master.
my ($new_owner) = IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('cluster-down'));
my @probes = grep { (IdempotencyTest::cluster_owner(IdempotencyTest::redis_key($_)))[0] == $new_owner }
             map { "cluster-down-probe-$_" } 1 .. 100;
IdempotencyTest::wait_until(sub { IdempotencyTest::nginx_post('/down-probe', shift(@probes) // 'none') == 201 }, 10)
    or die "the gateway did not find the new master\n";
--- request
POST /down
x
--- more_headers
Idempotency-Key: cluster-down
--- error_code: 201
--- response_headers
!Idempotent-Replayed
X-Upstream-Execution: 1


=== TEST 12: nginx -t: Redis Cluster has only database 0
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1 db=2;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_redis_cluster": Redis Cluster has only database 0


=== TEST 13: nginx -t: cluster nodes are reached over TCP
--- http_config
idempotency_redis_cluster unix:/tmp/redis.sock;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_redis_cluster": cluster nodes are reached over TCP, not "unix:/tmp/redis.sock"


=== TEST 14: nginx -t: one Redis store per level
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_redis_cluster": a Redis store is already set for this level
