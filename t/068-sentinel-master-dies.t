# Behind Redis Sentinel, a master that dies while the gateway has nothing
# in flight to it (docs/design.md#transient-errors-and-reloads): its
# connection's loss makes each worker ask the sentinels at once, and a
# command never goes to a master that is not connected without asking them
# first, so the first request on each worker after the failover goes to the
# new master — never to the dead one for a 503. A master, its replica and
# one sentinel (quorum 1, down-after 1 s) run on loopback ports.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

our ($sentinel, $master, $replica) = start_redis_sentinel();

master_on();
workers(2);
test_nginx_defaults();
run_tests();

sub locations {
    return location_conf('/', 'idempotency on', 'add_header X-Idempotency-Status $idempotency_status always',
                         'add_header X-Worker $pid always', 'proxy_pass http://backend');
}

# New keys until every worker has answered one (at most 60 tries): the
# answers, by worker, in the order they came.
my $seq = 0;
sub one_per_worker {
    my ($name) = @_;
    my %first;
    my @workers = IdempotencyTest::worker_pids();
    for my $try (1 .. 60) {
        last if keys %first == @workers;
        my $key = "$name-" . ++$seq;
        my $res = IdempotencyTest::post_key("/sm/$key", $key);
        my $w = $res->{headers}{'x-worker'} // 'none';
        $first{$w} //= "$res->{status} " . ($res->{headers}{'x-idempotency-status'} // '-');
    }
    return %first;
}

sub master_dies_idle {
    my %before = one_per_worker('before');
    Test::More::is(join(' ', sort values %before), '201 new 201 new', 'each worker stores through the first master');
    # no request in flight: the master dies, the sentinel fails it over
    IdempotencyTest::cluster_node_stop($main::master);
    IdempotencyTest::wait_until(sub { (IdempotencyTest::sentinel_master_port() // 0) == $main::replica }, 30)
        or die 'the sentinel did not promote the replica: ' . IdempotencyTest::sentinel_view($main::sentinel) . "\n";
    my %after = one_per_worker('after');
    Test::More::is(scalar keys %after, 2, 'both workers answered');
    Test::More::is(join(' ', sort values %after), '201 new 201 new',
                   'the first request on each worker after the failover goes to the new master');
}

__DATA__

=== TEST 1: the master dies while idle and is failed over: the first request on each worker succeeds
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_PORT;
--- config eval
main::locations()
--- init
main::master_dies_idle()
--- request
GET /_count/sm/after-1
--- error_code: 200
--- timeout: 40
