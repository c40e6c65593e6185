# Fenced writes
# (docs/design.md#only-the-claim-stores): an original whose claim was taken over while its
# upstream was still working can no longer store its response, release the
# key or renew the claim; each refusal is logged. On one Redis, on the zone
# store and on a Redis Cluster.
#
# On Redis the takeover is written straight into Redis: the claim is
# replaced by another gateway's claim for the same request (as if the
# original's claim had expired and that gateway had claimed the key, or
# Redis had lost it). Within the claim's lease (lease.hpp) the original's
# store is a plain SET ... XX GET that finds the other claim and puts it
# back; past the lease the fenced script refuses it (TESTs 11 and 12). On
# the zone store, the worker holding the claim is stopped (SIGSTOP) past
# idempotency_lock_ttl, a retry on the other worker claims the key, and the
# first worker then goes on (SIGCONT): a stalled gateway waking up late.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

start_redis_cluster(3);

master_on();
workers(2);
test_nginx_defaults();
run_tests();

# The connection of the retry that took the key over in TEST 5, read in
# TEST 6. Test::Nginx evaluates --- init in its own package
# (Test::Nginx::Util), so --- init names it in full.
our $retry;

# A worker left stopped by a failed block would never exit.
our @stopped;
END { kill 'CONT', @stopped if @stopped }

sub stop_worker {
    my ($pid) = @_;
    push @stopped, $pid;
    kill 'STOP', $pid or die "cannot stop worker $pid: $!\n";
}

sub cont_worker {
    my ($pid) = @_;
    kill 'CONT', $pid;
    @stopped = grep { $_ != $pid } @stopped;
}

sub connect_nginx {
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => IdempotencyTest::nginx_port(),
                                     Proto => 'tcp', Timeout => 10)
        or die "cannot connect to nginx: $!\n";
    return $sock;
}

# The pid of the worker that serves $sock, asked on it (GET /pid, the
# connection kept open for the next request).
sub worker_of {
    my ($sock) = @_;
    print {$sock} "GET /pid HTTP/1.1\r\nHost: localhost\r\n\r\n";
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), time + 10);
    until ($buf =~ /\r\n\r\n\d+\z/) {
        die "no answer to GET /pid\n" if time > $deadline;
        next unless $sel->can_read($deadline - time);
        sysread($sock, $buf, 4096, length $buf) or die "GET /pid: connection closed\n";
    }
    my ($pid) = $buf =~ /(\d+)\z/;
    return $pid;
}

sub post {
    my ($sock, $uri, $key) = @_;
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                  . "Content-Length: 1\r\n\r\nx";
}

# POSTs "x" to $uri with $key on a new connection and returns it once the
# upstream has started on it; with $ask_pid, also the pid of the worker that
# serves it (asked first, on the same connection: the config has /pid).
sub in_flight {
    my ($uri, $key, $ask_pid) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = IdempotencyTest::upstream_count($path);
    my $sock = connect_nginx();
    my $pid = $ask_pid ? worker_of($sock) : undef;
    post($sock, $uri, $key);
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) > $before }, 10)
        or die "POST $uri never reached the upstream\n";
    return wantarray ? ($sock, $pid) : $sock;
}

# Reads a response to the end of the connection: {status, headers (lower-case
# names), body}.
sub read_response { IdempotencyTest::read_response(@_) }

# Replaces the claim under $rkey (on the Redis at $port) with another
# gateway's claim for the same request: the same fingerprint, another
# token, for $px ms. Returns it.
sub take_over {
    my ($port, $rkey, $px) = @_;
    my $claim = IdempotencyTest::redis_command_at($port, 'GET', $rkey);
    die "no claim under $rkey to take over\n" unless defined $claim && substr($claim, 0, 5) eq "IDM\x01\x01";
    my $token = 'another gateway';
    my $other = substr($claim, 0, 37) . chr(length $token) . $token;
    IdempotencyTest::redis_command_at($port, 'SET', $rkey, $other, 'PX', $px);
    return $other;
}

sub cluster_port {
    my ($key) = @_;
    return (IdempotencyTest::cluster_owner(IdempotencyTest::redis_key($key)))[0];
}

# The original's late store, on the Redis at $port: its client still gets
# the response, the other claim stays.
sub late_store {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    my $other = take_over($port, $rkey, 60000);
    my $res = read_response($original);
    Test::More::is($res->{status}, 201, "$key: the original's client gets the upstream's response");
    IdempotencyTest::error_log_has('could not store the response');
    Test::More::ok(IdempotencyTest::redis_command_at($port, 'GET', $rkey) eq $other,
                   "$key: the other gateway's claim stays, the late response is not stored");
}

# Counts, with INFO commandstats, the Redis commands of one new request
# whose response is stored within its claim's lease: the claim and the
# store, two SETs, and no script.
sub store_within_lease {
    my ($uri, $key) = @_;
    IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
    IdempotencyTest::nginx_post($uri, $key) == 201 or die "POST $uri failed\n";
    IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq 'response' })
        or die "the response to $uri was not stored\n";
    my $stats = IdempotencyTest::redis_command('INFO', 'commandstats');
    my %calls = $stats =~ /^cmdstat_(\w+):calls=(\d+)/mg;
    Test::More::is($calls{set} // 0, 2, "$key: the claim and the store are two SETs");
    Test::More::is(($calls{evalsha} // 0) + ($calls{eval} // 0), 0, "$key: no script ran");
}

# The original's late release (its upstream answers 500): the other claim stays.
sub late_release {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    my $other = take_over($port, $rkey, 60000);
    my $res = read_response($original);
    Test::More::is($res->{status}, 500, "$key: the original's client gets the upstream's 500");
    IdempotencyTest::error_log_has('could not release the key');
    Test::More::ok(IdempotencyTest::redis_command_at($port, 'GET', $rkey) eq $other,
                   "$key: the other gateway's claim is not deleted");
}

# The original's late renewal (lock_ttl 3s: every second): the other claim,
# taken for 2.5 s, still expires on its own time.
sub late_renewal {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    take_over($port, $rkey, 2500);
    my $taken = time;
    sleep 1.3;  # past the original's first renewal
    my $asked = time;
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    my $most = 2500 - int(($asked - $taken) * 1000) + 20;
    Test::More::ok($left > 0 && $left <= $most,
                   "$key: the other gateway's claim is not extended: ${left} ms left, at most $most");
    IdempotencyTest::error_log_has('could not renew the claim');
    read_response($original);
}

__DATA__

=== TEST 1: Redis: a late store after a takeover is refused: the other claim stays, a retry gets 409
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_store(IdempotencyTest::redis_port(), '/fence/store?sleep=1', 'fence-store');
--- request
POST /fence/store?sleep=1
x
--- more_headers
Idempotency-Key: fence-store
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not store the response: the claim had expired or was taken over
within the claim's lease (Redis lost the claim, or its clock ran ahead): putting back what was there


=== TEST 2: Redis: a late release after a takeover is refused: the upstream's 5xx does not free the other claim
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_release(IdempotencyTest::redis_port(), '/fence/release?status=500&sleep=1', 'fence-release');
--- request
POST /fence/release?status=500&sleep=1
x
--- more_headers
Idempotency-Key: fence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 3: Redis: a late renewal after a takeover is refused: the other claim's TTL is not extended
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 3s;
    proxy_pass http://backend;
}
--- init
main::late_renewal(IdempotencyTest::redis_port(), '/fence/renew?sleep=1.5', 'fence-renew');
--- request
GET /_count/fence/renew
--- response_body: 1
--- error_log
could not renew the claim: the claim had expired or was taken over


=== TEST 4: zone: a late store after a takeover is refused: the response of the retry that took the key over stays
--- http_config
idempotency_zone zone=idem:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=idem;
    idempotency_lock_ttl 1s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location = /pid { return 200 $pid; }
--- init
# The worker of the original stalls past the lock_ttl; meanwhile a retry on
# the other worker takes the key over and completes. Then the stalled one
# goes on and tries to store its own response.
my ($original, $pid) = main::in_flight('/zfence/store?sleep=1', 'zfence-store', 'pid');
main::stop_worker($pid);
sleep 1.5;
my ($retry, $other) = main::in_flight('/zfence/store?sleep=1', 'zfence-store', 'pid');
my $second = main::read_response($retry);
main::cont_worker($pid);
my $first = main::read_response($original);
Test::More::isnt($other, $pid, 'zone store: the retry is served by the other worker');
Test::More::is("$second->{status} $second->{headers}{'x-upstream-execution'}", '201 2', 'zone store: the retry runs again');
Test::More::is("$first->{status} $first->{headers}{'x-upstream-execution'}", '201 1', 'zone store: the original gets its response');
IdempotencyTest::error_log_has('could not store the response');
--- request
POST /zfence/store?sleep=1
x
--- more_headers
Idempotency-Key: zfence-store
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 2
--- error_log
could not store the response: the claim had expired or was taken over


=== TEST 5: zone: a late release after a takeover is refused: the upstream's 5xx does not free the retry's claim
--- http_config
idempotency_zone zone=idem:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=idem;
    idempotency_lock_ttl 1s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location = /pid { return 200 $pid; }
--- init
# The worker of the original stalls past the lock_ttl; a retry on the other
# worker takes the key over; the original goes on and its upstream answers 500.
my ($original, $pid) = main::in_flight('/zfence/release?status=500&sleep=2', 'zfence-release', 'pid');
main::stop_worker($pid);
sleep 1.5;
$main::retry = main::in_flight('/zfence/release?status=500&sleep=2', 'zfence-release');
main::cont_worker($pid);
my $first = main::read_response($original);
Test::More::is($first->{status}, 500, "zone release: the original's client gets the upstream's 500");
IdempotencyTest::error_log_has('could not release the key');
--- request
POST /zfence/release?status=500&sleep=2
x
--- more_headers
Idempotency-Key: zfence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 6: ... the retry that holds the claim answers 500 and frees the key: the next retry runs again
--- init
my $res = main::read_response($main::retry);
Test::More::is($res->{status}, 500, "zone release: the retry's client gets the upstream's 500");
--- request
POST /zfence/release?status=500&sleep=2
x
--- more_headers
Idempotency-Key: zfence-release
--- error_code: 500
--- response_headers
X-Idempotency-Status: released
X-Upstream-Execution: 3


=== TEST 7: zone: a late renewal after a takeover is refused: the claim it took over is not kept alive
--- http_config
idempotency_zone zone=idem:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=idem;
    idempotency_lock_ttl 600ms;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location = /pid { return 200 $pid; }
--- init
# The original (worker A) stops; a retry on worker B takes the key over; A
# goes on, renewing; then B stops. Its claim must expire: a third request
# takes the key over and is the one whose response is stored.
my $uri = '/zfence/renew?sleep=2.5';
my ($first, $pid_a) = main::in_flight($uri, 'zfence-renew', 'pid');
main::stop_worker($pid_a);
sleep 1;
my ($second, $pid_b) = main::in_flight($uri, 'zfence-renew', 'pid');
main::cont_worker($pid_a);
main::stop_worker($pid_b);
sleep 1;  # A renews all along
my $third = main::connect_nginx();
main::post($third, $uri, 'zfence-renew');
IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count('/zfence/renew') == 3 }, 3);
main::cont_worker($pid_b);
my %status;  # by execution
for my $sock ($first, $second, $third) {
    my $res = main::read_response($sock);
    $status{ $res->{headers}{'x-upstream-execution'} // 'none' } = $res->{status};
}
Test::More::is_deeply(\%status, { 1 => 201, 2 => 201, 3 => 201 }, "zone renewal: the stopped retry's claim expired: a third execution");
--- request
POST /zfence/renew?sleep=2.5
x
--- more_headers
Idempotency-Key: zfence-renew
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
X-Upstream-Execution: 3
--- error_log
could not renew the claim: the claim had expired or was taken over


=== TEST 8: Cluster: a late store after a takeover is refused: the other claim stays, a retry gets 409
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_store(main::cluster_port('cfence-store'), '/cfence/store?sleep=1', 'cfence-store');
--- request
POST /cfence/store?sleep=1
x
--- more_headers
Idempotency-Key: cfence-store
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not store the response: the claim had expired or was taken over


=== TEST 9: Cluster: a late release after a takeover is refused: the upstream's 5xx does not free the other claim
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_release(main::cluster_port('cfence-release'), '/cfence/release?status=500&sleep=1', 'cfence-release');
--- request
POST /cfence/release?status=500&sleep=1
x
--- more_headers
Idempotency-Key: cfence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 10: Cluster: a late renewal after a takeover is refused: the other claim's TTL is not extended
--- http_config
idempotency_redis_cluster 127.0.0.1:$TEST_NGINX_CLUSTER_PORT_1;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 3s;
    proxy_pass http://backend;
}
--- init
main::late_renewal(main::cluster_port('cfence-renew'), '/cfence/renew?sleep=1.5', 'cfence-renew');
--- request
GET /_count/cfence/renew
--- response_body: 1
--- error_log
could not renew the claim: the claim had expired or was taken over


=== TEST 11: Redis: a response stored within its claim's lease is one plain SET ... XX GET, and no script runs
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- init
main::store_within_lease('/lease/1', 'lease-1');
--- request
POST /lease/1
x
--- more_headers
Idempotency-Key: lease-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true


=== TEST 12: Redis: past the claim's lease a late store goes through the fenced script, which refuses it after a takeover
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    # a lease of 3 s - (1 s + 0.3 s) = 1.7 s; the upstream answers after 2 s
    idempotency_lock_ttl 3s;
    idempotency_redis_timeout 1s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_store(IdempotencyTest::redis_port(), '/fence/past-lease?sleep=2', 'fence-past-lease');
--- request
POST /fence/past-lease?sleep=2
x
--- more_headers
Idempotency-Key: fence-past-lease
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not store the response: the claim had expired or was taken over
--- no_error_log
putting back
