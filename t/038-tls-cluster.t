# TLS to a Redis Cluster and through Redis Sentinel: with `ssl`,
# every node the module reaches — the seed, the addresses CLUSTER SLOTS and
# MOVED name (TLS ports: --tls-cluster yes), the sentinels and the master
# they name (--tls-replication yes) — is spoken to over TLS, checked with the
# same idempotency_redis_ssl_* settings. Each node also has a plain port,
# used only by the test to look inside.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

tls_files();
our @pairs = start_redis_cluster_tls(3);
# CLUSTER SLOTS names TLS ports to TLS clients, plain ports to the others
our %plain_of = map { ($_->[1] => $_->[0], $_->[0] => $_->[0]) } @pairs;
our ($sentinel, $master, $replica) = start_redis_sentinel_tls();
$ENV{TEST_NGINX_SENTINEL_MASTER_TLS_PORT} = $master->[1];

# The plain port of the master that serves the slot of client key $key, and
# the slot.
sub main::owner {
    my ($key) = @_;
    my $any = $main::pairs[0][0];
    my $slot = redis_command_at($any, 'CLUSTER', 'KEYSLOT', redis_key($key));
    for my $range (@{ redis_command_at($any, 'CLUSTER', 'SLOTS') }) {
        return ($main::plain_of{ $range->[2][1] }, $slot) if $slot >= $range->[0] && $slot <= $range->[1];
    }
    die "owner: slot $slot is not served\n";
}

# How many times the node on plain port $port answered MOVED.
sub main::moved {
    my ($port) = @_;
    my $stats = redis_command_at($port, 'INFO', 'errorstats') // '';
    return $stats =~ /errorstat_MOVED:count=(\d+)/ ? $1 : 0;
}

our @keys = map { "tls-spread-$_" } 1 .. 12;
our %masters_used = map { ((main::owner($_))[0] => 1) } @keys;
die "the keys do not spread over the three masters\n" unless keys %masters_used == 3;

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: keys of every master, from one TLS seed: stored over TLS where CLUSTER SLOTS says, and replayed
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_TLS_PORT_1 ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- init
for my $key (@main::keys) {
    my $status = IdempotencyTest::nginx_post("/cluster-tls/$key", $key);
    die "TEST 1: $key got $status\n" unless $status == 201;
}
for my $key (@main::keys) {
    my ($owner) = main::owner($key);
    my $value = IdempotencyTest::redis_command_at($owner, 'GET', IdempotencyTest::redis_key($key));
    die "TEST 1: $key is not stored on its master\n" unless defined $value && ord(substr($value, 4, 1)) == 2;
}
--- request eval
[map { "POST /cluster-tls/$_\nx" } @main::keys]
--- more_headers eval
[map { "Idempotency-Key: $_" } @main::keys]
--- error_code eval
[(201) x @main::keys]
--- response_headers eval
[("Idempotent-Replayed: true\nX-Upstream-Execution: 1") x @main::keys]
--- no_error_log
[error]


=== TEST 2: a slot moved to another master: MOVED (a TLS port) is followed over TLS
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_TLS_PORT_1 ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- init
# the map is learnt first, then the (empty) slot of tls-moved changes hands
my $status = IdempotencyTest::nginx_post('/cluster-tls/warm', 'tls-moved-warm');
die "TEST 2: warm-up got $status\n" unless $status == 201;
my ($from, $slot) = main::owner('tls-moved');
my ($to) = grep { $_ != $from } map { $_->[0] } @main::pairs;
Idem::RedisCluster::give_slot($slot, $to, map { $_->[0] } @main::pairs);
IdempotencyTest::wait_until(sub { (main::owner('tls-moved'))[0] == $to }, 10) or die "TEST 2: the slot did not move\n";
@main::moved = ($from, $to, main::moved($from));
--- request
POST /cluster-tls/moved
x
--- more_headers
Idempotency-Key: tls-moved
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
--- no_error_log
[error]


=== TEST 3: ... the old master answered MOVED, the new one holds the record
--- init
my ($from, $to, $before) = @main::moved;
Test::More::is(main::moved($from) - $before, 1, 'TEST 3: the old master answered MOVED once');
my $value = IdempotencyTest::redis_command_at($to, 'GET', IdempotencyTest::redis_key('tls-moved'));
Test::More::ok(defined $value && ord(substr($value, 4, 1)) == 2, 'TEST 3: the new master holds the response');
--- config
location = /t { return 200 "checked\n"; }
--- request
GET /t
--- response_body
checked


=== TEST 4: cluster nodes with a certificate the module does not trust: 503, logged with the reason
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_TLS_PORT_1 ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/other-ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /cluster-tls/untrusted
x
--- more_headers
Idempotency-Key: tls-untrusted
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: TLS failed: unknown CA: /


=== TEST 5: Sentinel over TLS: the sentinel, then the master it names, both over TLS
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /sentinel-tls/5
x
--- more_headers
Idempotency-Key: tls-sentinel-5
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
--- error_log eval
[qr/\[info\] .*idempotency: Redis Sentinel: master "mymaster" is 127\.0\.0\.1:$ENV{TEST_NGINX_SENTINEL_MASTER_TLS_PORT}$/,
 qr/\[info\] .*idempotency: Redis 127\.0\.0\.1:$ENV{TEST_NGINX_SENTINEL_TLS_PORT}: TLS handshake done/,
 qr/\[info\] .*idempotency: Redis 127\.0\.0\.1:$ENV{TEST_NGINX_SENTINEL_MASTER_TLS_PORT}: TLS handshake done/]
--- no_error_log
[error]


=== TEST 6: ... the record is on the master, and a failover is followed over TLS to the promoted replica
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- init
my ($m, $r, $s) = ($main::master->[0], $main::replica->[0], $main::sentinel->[0]);
my $value = IdempotencyTest::redis_command_at($m, 'GET', IdempotencyTest::redis_key('tls-sentinel-5'));
die "TEST 6: the stored response of tls-sentinel-5 is not on the master $m\n"
    unless defined $value && ord(substr($value, 4, 1)) == 2;
my $status = IdempotencyTest::nginx_post('/sentinel-tls/6', 'tls-sentinel-6');
die "TEST 6: before the failover, POST tls-sentinel-6 answered $status, not 201\n" unless $status == 201;
IdempotencyTest::replica_caught_up($m, $r)
    or die "TEST 6: the replica $r did not catch up with the master $m within 10 s\n";
# the replica (named by its TLS port) promoted, the old master demoted
IdempotencyTest::switch_master(sentinel => $s, old => $m, new => $main::replica->[1]);
--- request
POST /sentinel-tls/6
x
--- more_headers
Idempotency-Key: tls-sentinel-6
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis Sentinel: master "mymaster" is 127\.0\.0\.1:$main::replica->[1], was 127\.0\.0\.1:$main::master->[1]$/
