# Large responses in pieces while the store lags or fails
# (docs/design.md#large-responses-in-pieces): the capture holds at most
# one piece at the store and the one it fills, and reads the upstream no
# faster than the store takes them — with Redis throttled to 10 MB/s, a
# 64 MB response costs the worker a few MB, not the response; a piece
# that meets a lost connection (its reply cut, or dropped until the
# timeout) is sent again and the response is still replayed whole; and
# the pieces of a record that did not land (the claim was lost meanwhile)
# are deleted at once. A client slower than Redis, one that leaves, and
# one over HTTP/2 do not change what is kept.
# The blocks that throttle or break Redis (through a proxy) run on Redis
# only (--- redis_only); the others run on every store.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

use Digest::SHA qw(sha256_hex);
use Idem::FaultProxy ();
use Idem::HTTP ();
use Idem::Live ();
use Time::HiRes qw(time);

master_on();
workers(1);
test_nginx_defaults();

our $MB = 1024 * 1024;
our $THROTTLE = 10 * $MB;    # bytes per second Redis takes through the proxy
our $RSS_BOUND = 16;         # MB: what a capture may add to the worker's peak, whatever the response's size
$ENV{TEST_NGINX_H2_PORT} = IdempotencyTest::free_port();

# Redis behind a proxy that throttles, cuts or drops on command.
our $PROXY = Idem::FaultProxy::fault_proxy_start(IdempotencyTest::redis_port());
$ENV{TEST_NGINX_FAULT_PORT} = $PROXY->{port};

run_tests();

sub locations {
    my (@more) = @_;
    return location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 1m', @more,
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('/_count/', 'proxy_pass http://backend');
}

# One POST whose answer may take a while (a paced capture): the result of
# Idem::HTTP, read within 60 s.
sub post_slowly {
    my ($uri, $key) = @_;
    return Idem::HTTP::http_once({ port => IdempotencyTest::nginx_port(), method => 'POST', path => $uri,
                                   headers => [['Idempotency-Key', $key]], body => 'x', close => 1 }, 60);
}

# nginx runs under ASan (scripts/asan-suite.sh) or valgrind
# (scripts/valgrind-suite.sh): its memory is not the module's alone.
sub sanitized {
    return ($ENV{TEST_NGINX_BINARY} // '') =~ m{/(?:asan|valgrind)-nginx\.sh$};
}

sub peak_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or die "worker $pid: $!\n";
    while (<$fh>) { return $1 if /^VmHWM:\s+(\d+)/ }
    die "worker $pid: no VmHWM\n";
}

# The original of $key ($size bytes), then its retry: a replay, byte for
# byte, of a response executed once.
sub kept_whole {
    my ($name, $uri, $key, $size) = @_;
    my $first = post_slowly($uri, $key);
    Test::More::is(($first->{status} // $first->{error}) . ' ' . length($first->{body} // ''), "201 $size",
                   "$name: the original, whole");
    Idem::Store::stored($key, 'response', 30) or Test::More::diag("$name: no response stored for $key");
    my $retry = post_slowly($uri, $key);
    Test::More::is(($retry->{status} // $retry->{error}) . ' ' . ($retry->{headers}{'idempotent-replayed'} // '-'),
                   '201 true', "$name: the retry is a replay");
    Test::More::ok(length($retry->{body} // '') == $size && sha256_hex($retry->{body}) eq sha256_hex($first->{body}),
                   "$name: byte for byte");
    (my $path = $uri) =~ s/\?.*//;
    Test::More::is(IdempotencyTest::upstream_count($path), 1, "$name: executed once");
    return $first;
}

# A 64 MB response while Redis takes 10 MB/s: what the worker's peak
# memory grows by, after a first large response warmed up what a capture
# keeps for good (the compressor, the connection's buffer).
sub throttled {
    my ($tag) = @_;
    my ($worker) = IdempotencyTest::worker_pids();
    kept_whole("$tag warm-up", "/t$tag/0?kind=noise&size=" . (3 * $MB), "t$tag-0", 3 * $MB);
    Idem::FaultProxy::fault_proxy_rate($PROXY, $THROTTLE);
    my $before = peak_kb($worker);
    my $t0 = time;
    kept_whole("$tag 64 MB", "/t$tag/1?kind=noise&size=" . (64 * $MB), "t$tag-1", 64 * $MB);
    my $grew = (peak_kb($worker) - $before) / 1024;
    Idem::FaultProxy::fault_proxy_rate($PROXY, 0);
    my $what = sprintf '%s: the worker\'s peak grew by %.1f MB (%.1f s)', $tag, $grew, time - $t0;
    if (sanitized()) {
        Test::More::note("$what; not held to $RSS_BOUND MB under a sanitizer, which keeps freed memory a while");
    } else {
        Test::More::cmp_ok($grew, '<', $RSS_BOUND, $what);
    }
}

# The original's pieces meet Redis failing ($mode, once, on the reply to
# the write of piece $index): the piece is sent again, and the response is
# kept whole.
sub piece_fails {
    my ($key, $mode, $index) = @_;
    my $base = Idem::FaultProxy::fault_proxy_stats($PROXY);
    Idem::FaultProxy::fault_proxy_mode($PROXY, $mode, 1, sprintf(':%08x', $index));
    kept_whole("$mode at piece $index", "/f/$key?kind=noise&size=" . (5 * $MB + 7), $key, 5 * $MB + 7);
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    my $stats = Idem::FaultProxy::fault_proxy_stats($PROXY);
    Test::More::cmp_ok($stats->{faults} - $base->{faults}, '>=', 1, "$mode at piece $index: the write met the fault");
    Test::More::cmp_ok($stats->{connections}, '>', $base->{connections}, "$mode at piece $index: Redis reconnected");
}

# Every reply to the write of piece 1 cut: the piece is tried again for
# idempotency_lock_ttl, the response held back meanwhile; then it goes on
# to the client whole, not kept (410), never executed again.
sub piece_never_lands {
    my $size = 300 * 1024;    # five pieces of 64k
    my $uri = "/nl/1?kind=noise&size=$size";
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'cut', 0, ':00000001');
    my $t0 = time;
    my $first = post_slowly($uri, 'nl-1');
    my $took = time - $t0;
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    Test::More::is(($first->{status} // $first->{error}) . ' ' . length($first->{body} // ''), "201 $size",
                   'the original, whole');
    Test::More::cmp_ok($took, '>=', 2.9, sprintf 'held back for the whole window (%.1f s)', $took);
    Test::More::cmp_ok($took, '<', 15, sprintf '... and no longer than the window and a little (%.1f s)', $took);
    Idem::Store::stored('nl-1', 'unreplayable') or Test::More::diag('no marker stored for nl-1');
    Test::More::is(IdempotencyTest::post_key($uri, 'nl-1')->{status}, 410, 'its retry: 410');
    Test::More::is(IdempotencyTest::upstream_count('/nl/1'), 1, 'executed once');
}

# The keys of the pieces of $key's record(s) in Redis.
sub piece_keys {
    my ($key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my @keys = sort grep { index($_, "{$rkey}:p") == 0 } @{ IdempotencyTest::redis_command('KEYS', '*') };
    return @keys;
}

# The original's claim is replaced in Redis while its response streams
# (another request's claim: its own was lost), and a renewal has found it
# gone; then the rest of the response comes: its record is refused, and
# its pieces are deleted at once.
sub claim_lost {
    my $key = 'cl-1';
    my $rkey = IdempotencyTest::redis_key($key);
    my $sock = IdempotencyTest::start_in_flight('/cl/1?kind=noise&size=' . (3 * $MB) . '&trickle=1&gate=cl1', $key);
    # the first quarter of the body: no piece yet (a piece is 1 MB)
    Idem::Live::open_gate('cl1', 2);
    IdempotencyTest::wait_until(sub { my @keys = piece_keys($key); @keys >= 1 }, 10) or die "no piece of $key written\n";
    my $claim = IdempotencyTest::redis_command('GET', $rkey);
    die "no claim under $key\n" unless defined $claim && substr($claim, 0, 5) eq "IDM\x01\x01";
    substr($claim, -1, 1) = chr(ord(substr($claim, -1, 1)) ^ 1);    # another request's token
    IdempotencyTest::redis_command('SET', $rkey, $claim, 'PX', 60000);
    IdempotencyTest::error_log_has('could not renew the claim', 10) or die "no renewal found the claim gone\n";
    Idem::Live::open_gate('cl1', 4);
    my $res = IdempotencyTest::read_response($sock);
    Test::More::is("$res->{status} " . length $res->{body}, '201 ' . 3 * $MB, 'the original got its response');
    Test::More::ok(IdempotencyTest::wait_until(sub { my @keys = piece_keys($key); !@keys }, 5), 'its pieces are gone at once')
        or Test::More::diag(join ' ', map { "$_ (pttl " . IdempotencyTest::redis_command('PTTL', $_) . ')' }
                                  piece_keys($key));
    Test::More::is(IdempotencyTest::redis_command('GET', $rkey), $claim, 'the other claim is still there');
    Test::More::is(IdempotencyTest::upstream_count('/cl/1'), 1, 'executed once');
}

# A client that reads nothing, then leaves while the capture waits for
# the store (the answer to its first piece held back 1.5 s): nginx holds the
# whole response in its buffers for it, the upstream is done, and the
# request is ended for its client before the capture could take it all —
# which it then does at the store's pace, and the response is kept whole.
sub client_leaves {
    my $size = 300 * 1024;    # five pieces of 64k
    my $uri = "/cg/1?kind=noise&size=$size";
    my $base = Idem::FaultProxy::fault_proxy_stats($PROXY);
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'stall', 1500, ':00000000');
    my $sock = IdempotencyTest::start_in_flight($uri, 'cg-1');
    IdempotencyTest::wait_until(sub { Idem::FaultProxy::fault_proxy_stats($PROXY)->{stalled} > $base->{stalled} }, 10)
        or die "the first piece's answer was never held back\n";
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');    # that one is held back still
    close $sock;
    my $retry;
    IdempotencyTest::wait_until(sub { $retry = post_slowly($uri, 'cg-1'); ($retry->{status} // 0) != 409 }, 30);
    Test::More::is(($retry->{status} // $retry->{error}) . ' ' . ($retry->{headers}{'idempotent-replayed'} // '-')
                   . ' ' . length($retry->{body} // ''), "201 true $size", 'the retry is a replay of the whole');
    Test::More::is(IdempotencyTest::upstream_count('/cg/1'), 1, 'executed once');
}

# The last piece refused by the store at the end of the capture: a value of
# its name is there already (the test, playing whoever wrote it, puts it
# there once the claim tells the pieces' name), which `SET ... NX` refuses
# for good. The original still gets its response whole; its key ends with
# the marker (410), logged with the reason, never the record that would
# list a piece that is not its own.
sub last_piece_refused {
    my $key = 'lr-1';
    my $size = 300 * 1024;    # five pieces of 64k: the last is piece 4
    my $uri = "/lr/1?kind=noise&size=$size&chunked=1&trickle=1&gate=lr1";
    my $rkey = IdempotencyTest::redis_key($key);
    my ($at) = Idem::Store::on_cluster() ? IdempotencyTest::cluster_owner($rkey) : (IdempotencyTest::redis_port());
    my $original = Idem::Live::post(IdempotencyTest::nginx_port(), $uri, $key);
    $original->body_length(1);
    my $claim = IdempotencyTest::redis_command_at($at, 'GET', $rkey) // '';
    die "no claim under $key\n" unless substr($claim, 0, 5) eq "IDM\x01\x01";
    my $token = substr($claim, 38, ord(substr($claim, 37, 1)));    # past the fingerprint (module/record.hpp)
    my $last = "{$rkey}:p" . unpack('H*', substr($token, 0, 16)) . ':00000004';
    IdempotencyTest::redis_command_at($at, 'SET', $last, "not this response's piece", 'PX', 60000);
    Idem::Live::open_gate('lr1', 4);
    my $first = $original->finish;
    Test::More::ok($first->{complete} && length $first->{body} == $size, 'the original, whole');
    Test::More::ok(Idem::Store::stored($key, 'unreplayable'), 'its key keeps the marker');
    Test::More::is(IdempotencyTest::post_key($uri, $key)->{status}, 410, 'its retry: 410');
    Test::More::is(IdempotencyTest::upstream_count('/lr/1'), 1, 'executed once');
}

__DATA__

=== TEST 1: Redis at 10 MB/s, buffering on: a 64 MB response costs the worker two pieces, not the response
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::locations()
--- init
main::throttled('on')
--- request
GET /_count/ton/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]
--- log_level: info
--- timeout: 60



=== TEST 2: ... and with buffering off
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::locations('proxy_buffering off')
--- init
main::throttled('off')
--- request
GET /_count/toff/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]
--- log_level: info
--- timeout: 60



=== TEST 3: the reply to a piece's write cut with its connection: the piece is sent again, the response kept whole
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::locations()
--- init
main::piece_fails('cut-1', 'cut', 2)
--- request
GET /_count/f/cut-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[warn\] .*cannot write piece 2 of the response to "idem:[0-9a-f]{64}" now .*trying again/
--- log_level: info
--- timeout: 30



=== TEST 4: the reply to a piece's write lost until idempotency_redis_timeout: sent again, the response kept whole
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::locations('idempotency_redis_timeout 500ms')
--- init
main::piece_fails('drop-1', 'drop', 3)
--- request
GET /_count/f/drop-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[warn\] .*attempt 2 to write piece 3 of the response to "idem:[0-9a-f]{64}" succeeded/
--- log_level: info
--- timeout: 30



=== TEST 5: the claim lost while the response streams: its record is refused, its pieces deleted at once
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('idempotency_lock_ttl 3s')
--- init
main::claim_lost()
--- request
GET /_count/cl/1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[info\] .*the record of the response to "idem:[0-9a-f]{64}" was not stored: its 4 pieces are deleted/
--- log_level: info
--- timeout: 30



=== TEST 6: a client slower than the store: the response whole, kept whole
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('limit_rate 8m')
--- init
main::kept_whole('slow client', '/sc/1?kind=noise&size=' . (6 * $main::MB), 'sc-1', 6 * $main::MB)
--- request
GET /_count/sc/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]
--- log_level: info
--- timeout: 30



=== TEST 7: a client that reads nothing and leaves while the capture waits for the store, the upstream done: kept whole
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 64k',
                    'idempotency_redis_timeout 3s', 'proxy_buffers 64 16k', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::client_leaves()
--- request
GET /_count/cg/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]
--- log_level: info
--- timeout: 60



=== TEST 8: an original over HTTP/2, paced by the store: whole, then replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"listen 127.0.0.1:$ENV{TEST_NGINX_H2_PORT} http2;\n" . main::locations()
--- init
my $size = 9 * $main::MB + 3;
my $h2 = IdempotencyTest::h2_post($ENV{TEST_NGINX_H2_PORT}, "/h2/1?kind=noise&size=$size", key => 'h2-1', max_time => 30);
Test::More::is("$h2->{status} " . length $h2->{body}, "201 $size", 'over HTTP/2: the original, whole');
Idem::Store::stored('h2-1', 'response', 30);
my $retry = IdempotencyTest::post_key("/h2/1?kind=noise&size=$size", 'h2-1');
Test::More::ok($retry->{headers}{'idempotent-replayed'} && Digest::SHA::sha256_hex($retry->{body}) eq Digest::SHA::sha256_hex($h2->{body}), 'replayed byte for byte');
--- request
GET /_count/h2/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]
--- log_level: info
--- timeout: 60



=== TEST 9: a piece that never lands is tried again for idempotency_lock_ttl, then the response goes on, not kept
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 64k',
                    'idempotency_lock_ttl 3s', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::piece_never_lands()
--- request
GET /_count/nl/1
--- error_code: 200
--- response_body: 1
--- error_log eval
[qr/\[warn\] .*cannot write piece 1 of the response to "idem:[0-9a-f]{64}" now .*trying again for up to 3000 ms/,
 qr/\[error\] .*gave up writing piece 1 of the response to "idem:[0-9a-f]{64}" after \d+ attempts in \d+ ms/]
--- no_error_log
[alert]
--- log_level: info
--- timeout: 30




=== TEST 10: the last piece refused by the store at the end of the capture: the response goes on whole, its key ends unreplayable, logged with why
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 64k',
                    'proxy_buffering off', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::last_piece_refused()
--- request
GET /_count/lr/1
--- error_code: 200
--- response_body: 1
--- error_log eval
[qr/\[error\] .*the store did not keep a piece of the response to "idem:[0-9a-f]{64}" \(a piece of that name was there/,
 qr/\[warn\] .*the response to "idem:[0-9a-f]{64}" cannot be replayed: a piece of it could not be stored/]
--- no_error_log
[alert]
--- timeout: 30
