# A transient Redis failure of what the module owes Redis once the upstream
# has answered
# (docs/design.md#transient-errors-and-reloads): an
# error reply that says "not now" (OOM, READONLY, BUSY, LOADING, ...) or a
# lost connection. The store tries again with a backoff, keeping the claim
# alive, for idempotency_lock_ttl (at least 20 s): retries meanwhile get 409,
# then the replay, and the upstream runs once. Logged once, not per attempt;
# a store refused for memory keeps its claim for idempotency_ttl (t/045).
# A release is tried again until the claim would have expired anyway.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf metered_location);
use Test::Nginx::Socket 'no_plan';
use POSIX ();
use Time::HiRes ();

test_nginx_defaults();

# POSTs "x" with the key (Connection: close) and returns the socket once the
# upstream has started on it; finish() reads the whole response and returns
# its status.
sub start_original {
    my ($uri, $key) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = IdempotencyTest::upstream_count($path);
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx");
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) > $before }, 10)
        or die "the original POST $uri never reached the upstream\n";
    return $sock;
}

sub finish {
    my ($sock) = @_;
    my $response = do { local $/; <$sock> } // '';
    close $sock;
    return $response =~ m{\AHTTP/1\.[01] (\d{3})} ? $1 : 0;
}

sub post { finish(start_original(@_)) }

# What the module keeps under the key; 'unknown' while Redis cannot tell.
sub kind_of {
    my $kind = eval { IdempotencyTest::stored_kind(IdempotencyTest::redis_key($_[0])) };
    return $@ ? 'unknown' : $kind // 'nothing';
}

# Redis with room for claims and renewals but not for a store carrying a
# 1 MB response: while Redis reads that command it holds the argument and a
# query buffer as large for the next one (2 MB), then the buffer alone.
sub leave_no_room_for_large_stores {
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    my ($used) = IdempotencyTest::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', $used + 1_600_000);
}

# A retry while the original's 1 MB store is refused finds its claim: 409.
# Redis 8 may still count that store's memory when the retry's claim
# arrives, and refuse the claim (503: nothing executed); the retry is sent
# again until it meets the claim (for at most 5 s). Returns every answer.
sub retry_until_claim_found {
    my ($uri, $key) = @_;
    my @seen;
    IdempotencyTest::wait_until(sub { push @seen, IdempotencyTest::nginx_post($uri, $key); $seen[-1] == 409 }, 5);
    return @seen;
}

# Runs a script that keeps Redis busy for $seconds, in a child process;
# returns its pid.
sub keep_redis_busy {
    my ($seconds) = @_;
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        eval {
            IdempotencyTest::redis_command('EVAL', 'local t = redis.call("TIME") while true do '
                . 'local n = redis.call("TIME") if n[1] - t[1] >= tonumber(ARGV[1]) then break end end return 1',
                0, $seconds);
        };
        POSIX::_exit(0);
    }
    return $pid;
}

# Waits until Redis answers BUSY (the script of keep_redis_busy runs).
sub await_busy {
    IdempotencyTest::wait_until(sub { !eval { IdempotencyTest::redis_command('PING'); 1 } && $@ =~ /BUSY/ }, 10)
        or die "Redis never got busy\n";
}

# Restarts Redis (its data saved and loaded again) loading slowly: every
# command is answered LOADING for about two seconds. The usual Redis comes
# back with start_redis().
our $loading_pid;
sub restart_redis_loading_slowly {
    my $port = IdempotencyTest::redis_port();
    my $dir = IdempotencyTest::redis_command('CONFIG', 'GET', 'dir')->[1];
    # incompressible values, so that loading reads enough bytes to answer
    # clients between keys
    IdempotencyTest::redis_command('SET', "filler:$_", join('', map { chr(65 + int rand 26) } 1 .. 2000))
        for 1 .. 20;
    IdempotencyTest::redis_command('SAVE');
    IdempotencyTest::stop_redis();
    my $bin = IdempotencyTest::find_redis_server();
    $loading_pid = IdempotencyTest::spawn("$dir/loading.log", $bin, '--bind', '127.0.0.1', '--port', $port,
        '--save', '', '--appendonly', 'no', '--dir', $dir, '--daemonize', 'no',
        '--key-load-delay', 100000, '--loading-process-events-interval-bytes', 1024);
    IdempotencyTest::wait_until(sub {
        my $reply = eval { IdempotencyTest::redis_command('PING') };
        $@ =~ /LOADING/ || defined $reply;
    }, 10) or die "Redis did not come back\n";
}

sub back_to_usual_redis {
    my $dir = IdempotencyTest::redis_command('CONFIG', 'GET', 'dir')->[1];
    IdempotencyTest::redis_command('FLUSHALL');
    IdempotencyTest::stop_pid($loading_pid);
    unlink "$dir/dump.rdb";
    IdempotencyTest::start_redis();
}

sub metric {
    my ($name) = @_;
    my $sock = IdempotencyTest::send_request("GET /metrics HTTP/1.0\r\n\r\n");
    my $page = do { local $/; <$sock> } // '';
    return $page =~ /^\Q$name\E (\d+)$/m ? $1 : 'absent';
}

run_tests();

__DATA__

=== TEST 1: Redis out of memory for a large response: retries get 409 past idempotency_lock_ttl, then the replay; one execution, logged once
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 1s', 'idempotency_max_response_size 4m')
--- init
main::leave_no_room_for_large_stores();
Test::More::is(main::post('/oom/1?size=1000000', 'oom-1'), 201, 'the original is answered in full');
my @seen = main::retry_until_claim_found('/oom/1?size=1000000', 'oom-1');
Test::More::is($seen[-1], 409, 'its store refused, a retry finds the claim');
Test::More::is(join(' ', grep { $_ != 409 && $_ != 503 } @seen), '', "no retry got more than 409 or 503 (@seen)");
Time::HiRes::sleep(2.5);
Test::More::is(main::kind_of('oom-1'), 'claim', 'the claim lives on past its lock_ttl');
Test::More::is(IdempotencyTest::nginx_post('/oom/1?size=1000000', 'oom-1'), 409, 'a retry still gets 409');
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', 0);
IdempotencyTest::wait_until(sub { main::kind_of('oom-1') eq 'response' }, 5);
--- request
POST /oom/1?size=1000000
x
--- more_headers
Idempotency-Key: oom-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: replayed
--- response_body_like: \A(?:[a-zA-Z0-9\n]{50000}){20}\z
--- grep_error_log eval: qr/is out of memory and refused the response(?= for "idem:[0-9a-f]+": its claim is kept for idempotency_ttl)/
--- grep_error_log_out
is out of memory and refused the response
--- error_log eval
qr/\[warn\] .*attempt \d+ to store the response for "idem:[0-9a-f]+" on Redis \S+ succeeded/
--- no_error_log eval
qr/\[error\](?!.*(?: refused the claim: OOM | is out of memory and refused the response for ))/
--- timeout: 20


=== TEST 2: a Redis demoted to a replica (READONLY) while the response is stored: stored once it is a master again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 4s')
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', 0);
my $original = main::start_original('/ro/2?sleep=1', 'ro-2');
# a replica of a master that does not exist: it refuses writes
IdempotencyTest::redis_command('REPLICAOF', '127.0.0.1', '1');
Test::More::is(main::finish($original), 201, 'the original is answered');
Test::More::is(IdempotencyTest::nginx_post('/ro/2?sleep=1', 'ro-2'), 503, 'a retry meanwhile: its claim is refused too');
IdempotencyTest::error_log_has('cannot store the response') or die "the store never met READONLY\n";
IdempotencyTest::redis_command('REPLICAOF', 'NO', 'ONE');
IdempotencyTest::wait_until(sub { main::kind_of('ro-2') eq 'response' }, 6);
--- request
POST /ro/2?sleep=1
x
--- more_headers
Idempotency-Key: ro-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- grep_error_log eval: qr/cannot store the response(?= for "idem:[0-9a-f]+" on Redis \S+ now: READONLY)/
--- grep_error_log_out
cannot store the response
--- timeout: 20


=== TEST 3: Redis busy running a long script (BUSY) while the response is stored: stored once the script is over
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 4s')
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'busy-reply-threshold', 100);
my $original = main::start_original('/busy/3?sleep=1', 'busy-3');
my $busy = main::keep_redis_busy(2);
main::await_busy();
Test::More::is(main::finish($original), 201, 'the original is answered');
waitpid($busy, 0);
IdempotencyTest::redis_command('CONFIG', 'SET', 'busy-reply-threshold', 5000);
IdempotencyTest::wait_until(sub { main::kind_of('busy-3') eq 'response' }, 6);
--- request
POST /busy/3?sleep=1
x
--- more_headers
Idempotency-Key: busy-3
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- grep_error_log eval: qr/cannot store the response(?= for "idem:[0-9a-f]+" on Redis \S+ now: BUSY)/
--- grep_error_log_out
cannot store the response
--- timeout: 20


=== TEST 4: Redis restarted while the response is stored, answering LOADING for a while: stored once it has loaded
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 8s')
--- init
my $original = main::start_original('/loading/4?sleep=1', 'loading-4');
main::restart_redis_loading_slowly();
Test::More::is(main::finish($original), 201, 'the original is answered');
IdempotencyTest::wait_until(sub { main::kind_of('loading-4') eq 'response' }, 9);
--- request
POST /loading/4?sleep=1
x
--- more_headers
Idempotency-Key: loading-4
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- grep_error_log eval: qr/cannot store the response(?= for "idem:[0-9a-f]+" on Redis \S+ now: (?:LOADING|the connection was lost))/
--- grep_error_log_out
cannot store the response
--- timeout: 20


=== TEST 5: Redis down for 20 s with the response to store: stored once it is back, within idempotency_lock_ttl
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 30s')
--- init
main::back_to_usual_redis();
my $original = main::start_original('/down/5?sleep=1', 'down-5');
# the claim outlives the restart
IdempotencyTest::redis_command('SAVE');
IdempotencyTest::stop_redis();
Test::More::is(main::finish($original), 201, 'the original is answered');
Time::HiRes::sleep(20);
IdempotencyTest::start_redis();
IdempotencyTest::wait_until(sub { main::kind_of('down-5') eq 'response' }, 5);
--- request
POST /down/5?sleep=1
x
--- more_headers
Idempotency-Key: down-5
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- grep_error_log eval: qr/cannot store the response(?= for "idem:[0-9a-f]+" on Redis \S+ now: (?:Redis cannot be reached|the connection was lost))/
--- grep_error_log_out
cannot store the response
--- timeout: 40


=== TEST 6: a release that meets READONLY is tried again: the retry runs afresh at once, not 409 until the claim expires
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_lock_ttl 10s')
--- init
my $dir = IdempotencyTest::redis_command('CONFIG', 'GET', 'dir')->[1];
unlink "$dir/dump.rdb";
my $original = main::start_original('/release/6?status=500&sleep=1', 'release-6');
IdempotencyTest::redis_command('REPLICAOF', '127.0.0.1', '1');
Test::More::is(main::finish($original), 500, 'the original is answered');
IdempotencyTest::error_log_has('cannot release the key') or die "the release never met READONLY\n";
IdempotencyTest::redis_command('REPLICAOF', 'NO', 'ONE');
IdempotencyTest::wait_until(sub { main::kind_of('release-6') eq 'nothing' }, 3);
--- request
POST /release/6?status=500&sleep=1
x
--- more_headers
Idempotency-Key: release-6
--- error_code: 500
--- response_headers
X-Upstream-Execution: 2
X-Idempotency-Status: released
--- grep_error_log eval: qr/cannot release the key(?= for "idem:[0-9a-f]+" on Redis \S+ now: READONLY .*trying again for up to 10000 ms$)/
--- grep_error_log_out
cannot release the key
--- timeout: 20


=== TEST 7: a release refused (BUSY) past idempotency_lock_ttl is given up: logged once, counted
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::metered_location('idempotency_lock_ttl 1s')
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'busy-reply-threshold', 100);
my $original = main::start_original('/release/7?status=500&sleep=1', 'release-7');
my $busy = main::keep_redis_busy(3);
main::await_busy();
Test::More::is(main::finish($original), 500, 'the original is answered');
waitpid($busy, 0);
IdempotencyTest::redis_command('CONFIG', 'SET', 'busy-reply-threshold', 5000);
Test::More::is(main::metric('idempotency_redis_abandoned_total{operation="release"}'), 1, 'counted');
--- request
POST /release/7?status=500&sleep=1
x
--- more_headers
Idempotency-Key: release-7
--- error_code: 500
--- grep_error_log eval: qr/(?:cannot|gave up trying to) release the key(?= for "idem:[0-9a-f]+" on Redis \S+ (?:now|after \d+ attempts in \d+ ms): BUSY)/
--- grep_error_log_out
cannot release the key
gave up trying to release the key
--- timeout: 20


=== TEST 8: a worker that exits with a response still to store logs it, and touches nothing it freed
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 1s',
                    'idempotency_max_response_size 4m', 'proxy_pass http://backend')
--- init
main::leave_no_room_for_large_stores();
Test::More::is(main::post('/exit/8?size=1000000', 'exit-8'), 201, 'the original is answered in full');
Test::More::is((main::retry_until_claim_found('/exit/8?size=1000000', 'exit-8'))[-1], 409, 'a retry finds the claim');
--- request
POST /exit/8?size=1000000
x
--- more_headers
Idempotency-Key: exit-8
--- error_code: 409
--- shutdown_error_log eval
qr/\[error\] .*the worker exits before it could store the response for "idem:[0-9a-f]+"/
--- timeout: 20


=== TEST 9: ... and Redis has room again
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', 0);
--- config eval
main::location_conf('= /t', 'return 204')
--- request
GET /t
--- error_code: 204
