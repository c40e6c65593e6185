# When the zone store's records expire (docs/directives.md#idempotency_zone: "records
# expire after idempotency_lock_ttl (claims) and idempotency_ttl
# (responses)"), on two workers as in t/021-zone.t:
#
# - a stored response is replayed until idempotency_ttl, then the key
#   executes again, the newest record first as well as the oldest;
# - a stored response outlives idempotency_lock_ttl, also when its upstream
#   ran longer than the lock (the claim was renewed meanwhile);
# - a claim whose worker died (SIGKILL) or stalls (SIGSTOP) holds the key for
#   idempotency_lock_ttl, not less, then the key executes again;
# - in a full zone, responses past their ttl make room for new claims;
# - fenced writes (docs/design.md#only-the-claim-stores): the original of a
#   stalled worker whose claim a retry took over can no longer release the
#   key or keep the other claim alive by renewing (its late store: TEST 6).
#
# Where the passage of time is the point the blocks sleep past a TTL, by a
# short, bounded margin; everything else is awaited (a takeover: retries
# until one reaches the upstream).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf summary);
use Test::Nginx::Socket 'no_plan';

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

master_on();
workers(2);
test_nginx_defaults();

our $MARGIN = 0.3;    # seconds past a TTL before a record counts as expired

run_tests();

# A worker left stopped by a failed block would never exit.
our @stopped;
END { kill 'CONT', @stopped if @stopped }

sub connect_nginx {
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => IdempotencyTest::nginx_port(),
                                     Proto => 'tcp', Timeout => 10)
        or die "cannot connect to nginx: $!\n";
    $sock->autoflush(1);
    return $sock;
}

# Reads a response to the end of the connection: {status, headers (lower-case
# names), body}.
sub read_response { IdempotencyTest::read_response(@_) }

sub post {
    my ($sock, $uri, $key) = @_;
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                  . "Content-Length: 1\r\n\r\nx";
}

# POSTs "x" to $uri with $key on its own connection; returns the response.
sub http { Idem::Blocks::post(@_) }

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

# POSTs "x" to $uri with $key on a new connection, first asking which worker
# serves it; returns the connection and that worker's pid once the upstream
# has started on the request (the claim is taken by then).
sub in_flight {
    my ($uri, $key) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = IdempotencyTest::upstream_count($path);
    my $sock = connect_nginx();
    my $pid = worker_of($sock);
    post($sock, $uri, $key);
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) > $before }, 10)
        or die "POST $uri never reached the upstream\n";
    return ($sock, $pid);
}

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

# The zone store "idem" guarding "location /" with @directives
# (Idem::Blocks::idem_location), and GET /pid: the pid of the worker that
# serves the connection.
sub pid_location {
    idem_location('idempotency_store zone=idem', @_) . location_conf('= /pid', 'return 200 $pid');
}

# Sleeps until $secs after $since.
sub sleep_until {
    my ($since, $secs) = @_;
    my $left = $since + $secs - time;
    sleep $left if $left > 0;
}

# Retries $uri with $key, each on a new connection, until one reaches the
# upstream: the claim it met has expired, it took the key over. Returns that
# connection (the request in flight) and the pid of its worker. The others
# got 409; gives up after $secs (default 5).
sub take_over {
    my ($uri, $key, $secs) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my ($sock, $pid);
    IdempotencyTest::wait_until(sub {
        my $before = IdempotencyTest::upstream_count($path);
        $sock = connect_nginx();
        $pid = worker_of($sock);
        post($sock, $uri, $key);
        my $sel = IO::Select->new($sock);
        IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) > $before || $sel->can_read(0) }, 10)
            or die "POST $uri: neither an answer nor the upstream\n";
        return 1 if IdempotencyTest::upstream_count($path) > $before;
        my $res = read_response($sock);
        die "POST $uri: $res->{status} while its claim was held\n" unless $res->{status} == 409;
        return 0;
    }, $secs // 5) or die "POST $uri never took the key over\n";
    return ($sock, $pid);
}

# POSTs new keys "$prefix-1", "$prefix-2", ... to $uri until one is answered
# 503 (the zone has no room for a claim); returns how many were answered 201.
sub fill_zone {
    my ($uri, $prefix) = @_;
    for my $i (1 .. 300) {
        my $res = http($uri, "$prefix-$i");
        return $i - 1 if $res->{status} == 503;
        die "unexpected $res->{status} while filling the zone\n" unless $res->{status} == 201;
    }
    die "the zone never filled up\n";
}

__DATA__

=== TEST 1: stored responses are replayed before idempotency_ttl
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::idem_location('idempotency_store zone=idem', 'idempotency_ttl 3s')
--- request eval
[("POST /e/1\nx") x 6]
--- more_headers eval
[map { "Idempotency-Key: e-1-$_" } qw(a b c a b c)]
--- error_code eval
[(201) x 6]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 1 .. 3),
 (map { "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: $_" } 1 .. 3)]
--- no_error_log
[error]


=== TEST 2: ... once idempotency_ttl has passed each key executes again, the newest record first, and that is stored
--- init
# Every record of TEST 1 was stored before this block began.
main::sleep_until(Time::HiRes::time(), 3 + $main::MARGIN);
--- request eval
[("POST /e/1\nx") x 4, "GET /_count/e/1"]
--- more_headers eval
[(map { "Idempotency-Key: e-1-$_" } qw(c a b c)), ""]
--- error_code eval
[(201) x 4, 200]
--- response_headers eval
[(map { "X-Idempotency-Status: new\n!Idempotent-Replayed\nX-Upstream-Execution: $_" } 4 .. 6),
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 4", ""]
--- response_body_like eval
[qr/"execution":4,/, qr/"execution":5,/, qr/"execution":6,/, qr/"execution":4,/, qr/\A6\z/]
--- no_error_log
[error]


=== TEST 3: a stored response outlives idempotency_lock_ttl
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::idem_location('idempotency_store zone=idem', 'idempotency_lock_ttl 1s', 'idempotency_ttl 1h')
--- init
my $first = main::http('/e/3', 'e-3');
Test::More::is(main::summary($first), '201 new 1', 'TEST 3: the first request executes');
main::sleep_until(Time::HiRes::time(), 1.5);
--- request
POST /e/3
x
--- more_headers
Idempotency-Key: e-3
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- no_error_log
[error]


=== TEST 4: an upstream slower than idempotency_lock_ttl keeps its claim, and its stored response outlives the lock too
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::pid_location('idempotency_lock_ttl 1s', 'idempotency_ttl 1h')
--- init
my ($original, $pid) = main::in_flight('/e/4?sleep=1.6', 'e-4');
my $started = Time::HiRes::time();
main::sleep_until($started, 1.2);    # past the lock: the claim lives on renewals
Test::More::is(main::summary(main::http('/e/4?sleep=1.6', 'e-4')), '409 conflict -',
               'TEST 4: a duplicate past idempotency_lock_ttl finds the renewed claim');
my $first = main::read_response($original);
Test::More::is(main::summary($first), '201 new 1', 'TEST 4: the original gets its response');
main::sleep_until(Time::HiRes::time(), 1.5);
--- request
POST /e/4?sleep=1.6
x
--- more_headers
Idempotency-Key: e-4
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- no_error_log
[error]


=== TEST 5: the claim of a worker killed mid-request holds the key for idempotency_lock_ttl, then the key executes again
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::pid_location('idempotency_lock_ttl 1500ms')
--- init
my ($original, $pid) = main::in_flight('/e/5?sleep=1', 'e-5');
my $killed = Time::HiRes::time();
kill 'KILL', $pid or die "cannot kill worker $pid: $!\n";
close $original;
# Renewed at most lock_ttl/3 before the kill, the claim lives at least 1 s
# after it, at most 1.5 s.
Test::More::is(main::summary(main::http('/e/5?sleep=1', 'e-5')), '409 conflict -',
               'TEST 5: the dead worker\'s claim still holds the key');
my ($res, $at);
IdempotencyTest::wait_until(sub {
    $at = Time::HiRes::time();
    $res = main::http('/e/5?sleep=1', 'e-5');
    return $res->{status} != 409;
}, 1.5 + 3);
Test::More::is(main::summary($res), '201 new 2', 'TEST 5: once the claim has expired the retry executes');
Test::More::cmp_ok($at - $killed, '>=', 0.9, sprintf('TEST 5: ... not before idempotency_lock_ttl (%.2f s after the kill)', $at - $killed));
Test::More::is(IdempotencyTest::upstream_count('/e/5'), 2, 'TEST 5: the upstream ran twice');
--- request
POST /e/5?sleep=1
x
--- more_headers
Idempotency-Key: e-5
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 2
--- response_body_like: "execution":2,
--- error_log
[alert]
exited on signal 9


=== TEST 6: the claim of a stalled worker expires after idempotency_lock_ttl: a retry on the other worker executes, the late original does not overwrite it
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::pid_location('idempotency_lock_ttl 1s')
--- init
my ($original, $pid) = main::in_flight('/e/6?sleep=1', 'e-6');
my $stopped = Time::HiRes::time();
main::stop_worker($pid);
Test::More::is(main::summary(main::http('/e/6?sleep=1', 'e-6')), '409 conflict -',
               'TEST 6: within idempotency_lock_ttl the stalled worker\'s claim holds the key');
main::sleep_until($stopped, 1 + $main::MARGIN);
my $retry = main::http('/e/6?sleep=1', 'e-6');
main::cont_worker($pid);
Test::More::is(main::summary($retry), '201 new 2', 'TEST 6: past idempotency_lock_ttl the retry executes');
Test::More::is(main::summary(main::read_response($original)), '201 new 1', 'TEST 6: the original gets its response');
Test::More::is(IdempotencyTest::upstream_count('/e/6'), 2, 'TEST 6: the upstream ran twice');
--- request
POST /e/6?sleep=1
x
--- more_headers
Idempotency-Key: e-6
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 2
--- response_body_like: "execution":2,
--- error_log
could not store the response: the claim had expired or was taken over


=== TEST 7: ... and on its nginx, a late release after a takeover is refused: the upstream's 5xx does not free the retry's claim
--- init
# The worker of the original stalls past the lock_ttl; a retry on the other
# worker takes the key over; the original goes on and its upstream answers 500.
my ($original, $pid) = main::in_flight('/e/8?status=500&sleep=2', 'e-8');
main::stop_worker($pid);
($main::retry) = main::take_over('/e/8?status=500&sleep=2', 'e-8');
main::cont_worker($pid);
Test::More::is(main::read_response($original)->{status}, 500, "TEST 7: the original's client gets the upstream's 500");
IdempotencyTest::error_log_has('could not release the key');
--- request
POST /e/8?status=500&sleep=2
x
--- more_headers
Idempotency-Key: e-8
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 8: ... the retry that holds the claim answers 500 and frees the key: the next retry runs again
--- init
Test::More::is(main::read_response($main::retry)->{status}, 500, "TEST 8: the retry's client gets the upstream's 500");
--- request
POST /e/8?status=500&sleep=2
x
--- more_headers
Idempotency-Key: e-8
--- error_code: 500
--- response_headers
X-Idempotency-Status: released
X-Upstream-Execution: 3


=== TEST 9: a full zone: once idempotency_ttl has passed, its records make room; the newest and the oldest key execute again
--- http_config
idempotency_zone zone=tiny:32k;
--- config eval
main::idem_location('idempotency_store zone=tiny', 'idempotency_ttl 6s')
--- init
# idempotency_ttl outlasts the filling (a dozen requests) on a loaded machine
my $n = main::fill_zone('/e/7?size=3000', 'e-7');
my $filled = Time::HiRes::time();
Test::More::cmp_ok($n, '>=', 3, "TEST 9: the zone holds several records ($n)");
main::sleep_until($filled, 6 + $main::MARGIN);
Test::More::is(main::summary(main::http('/e/7?size=3000', "e-7-$n")), '201 new ' . ($n + 1),
               'TEST 9: the newest record has expired: its key executes again');
--- request eval
["POST /e/7?size=3000\nx", "POST /e/7?size=3000\nx", "POST /e/7?size=3000\nx"]
--- more_headers eval
["Idempotency-Key: e-7-1", "Idempotency-Key: e-7-fresh", "Idempotency-Key: e-7-1"]
--- error_code eval
[201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\n!Idempotent-Replayed", "X-Idempotency-Status: new\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true"]


=== TEST 10: a late renewal after a takeover is refused: the claim it took over is not kept alive
--- http_config
idempotency_zone zone=idem:1m;
--- config eval
main::pid_location('idempotency_lock_ttl 600ms')
--- init
# The original (worker A) stops; a retry on worker B takes the key over; A
# goes on, renewing; then B stops. Its claim must expire: a third request
# takes the key over and is the one whose response is stored.
my $uri = '/e/10?sleep=2.5';
my ($first, $pid_a) = main::in_flight($uri, 'e-10');
main::stop_worker($pid_a);
my ($second, $pid_b) = main::take_over($uri, 'e-10');
main::cont_worker($pid_a);
main::stop_worker($pid_b);
IdempotencyTest::error_log_has('could not renew the claim') or die "A never tried to renew\n";
my ($third) = main::take_over($uri, 'e-10', 3);
main::cont_worker($pid_b);
my %status;  # by execution
for my $sock ($first, $second, $third) {
    my $res = main::read_response($sock);
    $status{ $res->{headers}{'x-upstream-execution'} // 'none' } = $res->{status};
}
Test::More::is_deeply(\%status, { 1 => 201, 2 => 201, 3 => 201 }, "TEST 10: the stopped retry's claim expired: a third execution");
--- request
POST /e/10?sleep=2.5
x
--- more_headers
Idempotency-Key: e-10
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
X-Upstream-Execution: 3
--- error_log
could not renew the claim: the claim had expired or was taken over
