# The store within the claim's lease writes only where the claim still is
# (docs/design.md#the-lease): `SET key record PX ttl XX GET` writes nothing
# when the key is gone. Here Redis loses the claim (a DEL straight into
# Redis) while the upstream works, and nobody claims the key meanwhile: the
# original's client still gets its response, but nothing is stored under
# the key — it stays absent — and a retry executes again (the store losing
# data is one of the ways to execute twice, docs/design.md#at-most-once).
# A store that wrote its record anyway would leave a response no claim
# stood for, and the retry would be a replay. On Redis (TEST 1) and on a
# Redis Cluster (TEST 2); the claim's lock TTL is long, so the store leaves
# within the lease and no renewal meets the missing claim first.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

start_redis_cluster(3);

test_nginx_defaults();
run_tests();

# POSTs "x" to $uri with $key, slowed down at the upstream by X-Delay (the
# location maps it to ?sleep=), deletes the claim from the Redis on $port
# while the upstream works, and reads the original's response. Checks that
# its client got it, that the store found the key gone, and that the key
# stays absent.
sub claim_deleted_mid_request {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $before = IdempotencyTest::upstream_count($uri);
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nX-Delay: 1\r\nContent-Length: 1\r\n\r\nx");
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($uri) > $before }, 10)
        or die "$key: the original never reached the upstream\n";
    my $claim = IdempotencyTest::redis_command_at($port, 'GET', $rkey);
    die "$key: no claim under the key while the upstream works\n"
        unless defined $claim && substr($claim, 0, 5) eq "IDM\x01\x01";
    IdempotencyTest::redis_command_at($port, 'DEL', $rkey) == 1 or die "$key: the claim was not deleted\n";
    IdempotencyTest::redis_command_at($port, 'CONFIG', 'RESETSTAT');

    my $response = IdempotencyTest::read_response($sock);
    Test::More::is($response->{status}, 201, "$key: the original's client gets its response");
    Test::More::like($response->{body}, qr/"execution":1\b/, "$key: the upstream's response");
    Test::More::ok(IdempotencyTest::error_log_has('could not store the response: the claim had expired or was taken over', 10),
                   "$key: the store found the claim gone");
    my %calls = IdempotencyTest::redis_command_at($port, 'INFO', 'commandstats') =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    Test::More::ok(($calls{exec} // 0) >= 1 && !$calls{evalsha} && !$calls{eval},
                   "$key: the store left within the claim's lease (MULTI ... EXEC, no script)");
    Test::More::is(IdempotencyTest::redis_command_at($port, 'EXISTS', $rkey), 0,
                   "$key: nothing is stored under the key");
    Test::More::is(IdempotencyTest::upstream_count($uri), 1, "$key: one execution so far");
}

__DATA__

=== TEST 1: Redis: the claim deleted while the upstream works: the original's store writes nothing, the key stays absent, a retry executes again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 30s;
    idempotency_ttl 1h;
    proxy_pass http://backend$uri$delay_args;
}
--- init
main::claim_deleted_mid_request(IdempotencyTest::redis_port(), '/deleted/redis', 'deleted-redis');
--- request
POST /deleted/redis
x
--- more_headers
Idempotency-Key: deleted-redis
--- error_code: 201
--- response_headers
!Idempotent-Replayed
--- response_body_like: "execution":2\b
--- no_error_log
putting back
was lost by Redis while its request ran


=== TEST 2: Cluster: the claim deleted while the upstream works: the original's store writes nothing, the key stays absent, a retry executes again
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_2;
map $http_x_delay $delay_args { default ""; ~^(?<s>[0-9.]+)$ "?sleep=$s"; }
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 30s;
    idempotency_ttl 1h;
    proxy_pass http://backend$uri$delay_args;
}
--- init
main::claim_deleted_mid_request((IdempotencyTest::cluster_owner(IdempotencyTest::redis_key('deleted-cluster')))[0],
                                '/deleted/cluster', 'deleted-cluster');
--- request
POST /deleted/cluster
x
--- more_headers
Idempotency-Key: deleted-cluster
--- error_code: 201
--- response_headers
!Idempotent-Replayed
--- response_body_like: "execution":2\b
--- no_error_log
putting back
was lost by Redis while its request ran
