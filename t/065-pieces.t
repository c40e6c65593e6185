# Large responses kept in pieces (docs/design.md#large-responses-in-pieces):
# where idempotency_max_response_size is raised above the piece size, a
# response larger than idempotency_piece_size (and up to the limit) is kept as pieces under keys of their own
# on its key's Cluster slot, listed by a record of version 4 that lands
# once every piece has; its retries are replayed byte for byte, streamed a
# piece at a time, and the upstream executes it once. A piece missing, of
# another response, or altered, makes the retry 410: never a part of the
# response, never a second execution. A client that leaves during a large
# capture does not stop it.
# Runs on Redis, on the zone store and on the Redis Cluster (the blocks
# marked --- redis_only, which read or alter Redis, on Redis only).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

use Digest::SHA qw(sha256_hex);
use Compress::Zlib ();
use Idem::FaultProxy ();
use Idem::HTTP ();
use Idem::Live ();
use Socket qw(SOL_SOCKET SO_RCVBUF inet_aton pack_sockaddr_in);
use Time::HiRes qw(time);

master_on();
workers(2);
test_nginx_defaults();

our $KEY_HEX = '6a' x 32;
$ENV{TEST_NGINX_H2_PORT} = IdempotencyTest::free_port();
$ENV{TEST_NGINX_SLOW_PORT} = IdempotencyTest::free_port();    # a listener with a small send buffer
our $MB = 1024 * 1024;
our $PIECE = $MB - 128;    # the body bytes a piece of 1m holds (module/pieces.hpp)
our $SMALL = 300 * 1024;   # a response kept in five pieces of 64k, for the blocks whose pieces fail

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('user_files', ">>> seal.key\n$KEY_HEX\n") unless defined $block->user_files;
});

# Redis behind a proxy that fails the look at the pieces on command (the
# look is the only command holding STRLEN).
our $PROXY = Idem::FaultProxy::fault_proxy_start(IdempotencyTest::redis_port());
$ENV{TEST_NGINX_FAULT_PORT} = $PROXY->{port};
our $LOOK = 'STRLEN';

run_tests();

sub locations {
    my (@more) = @_;
    return location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 1m', @more,
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('/_admin', @more, 'idempotency_admin');
}

sub send_post { IdempotencyTest::post_key(@_) }

# The original, its record in the store, then its retry: a replay, byte
# for byte, of a response executed once.
sub new_then_replay {
    my ($name, $uri, $key, $size) = @_;
    my $first = send_post($uri, $key);
    Test::More::is("$first->{status} $first->{headers}{'x-idempotency-status'}", '201 new', "$name: the original");
    Test::More::is(length $first->{body}, $size, "$name: the original's body whole");
    # settled before answered: the record was sent before the last byte
    my $retry = send_post($uri, $key);
    Test::More::is("$retry->{status} " . ($retry->{headers}{'x-idempotency-status'} // '-') . ' '
                   . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 replayed true', "$name: the retry is a replay")
        or Test::More::diag(substr($retry->{body}, 0, 300));
    Test::More::is($retry->{headers}{'content-length'}, $size, "$name: with the body's length");
    Test::More::is(length $retry->{body}, $size, "$name: of the same length");
    Test::More::ok(sha256_hex($retry->{body}) eq sha256_hex($first->{body}), "$name: byte for byte");
    (my $path = $uri) =~ s/\?.*//;
    Test::More::is(IdempotencyTest::upstream_count($path), 1, "$name: executed once");
    return $first;
}

# The piece keys of $key's record in Redis, with their values.
sub pieces_of {
    my ($key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my @keys = sort grep { index($_, "{$rkey}:p") == 0 } @{ IdempotencyTest::redis_command('KEYS', '*') };
    return ($rkey, @keys);
}

sub in_redis {
    my $first = new_then_replay('in Redis', '/r/1?kind=noise&size=' . (5 * $MB + 123), 'r-1', 5 * $MB + 123);
    my ($rkey, @pieces) = pieces_of('r-1');
    my $record = IdempotencyTest::redis_command('GET', $rkey);
    Test::More::is(substr($record, 0, 5), "IDM\x04\x02", 'the record is a response of version 4');
    Test::More::cmp_ok(length $record, '<', 1024, '... of ' . length($record) . ' bytes: the list, not the body');
    Test::More::is(scalar @pieces, 6, 'six pieces, each on the record key\'s slot (hash tag)');
    Test::More::ok((grep { length(IdempotencyTest::redis_command('GET', $_)) <= $MB - 64 } @pieces) == 6,
                   'none over the piece size, with room for Redis\'s own header');
    my $ttl = IdempotencyTest::redis_command('PTTL', $rkey);
    Test::More::ok((grep { IdempotencyTest::redis_command('PTTL', $_) >= $ttl } @pieces) == 6,
                   'every piece outlives the record');
}

sub inspect { IdempotencyTest::admin_inspect(@_) }

sub large_everywhere {
    new_then_replay('20 MB', '/l/1?kind=noise&size=' . (20 * $MB), 'l-1', 20 * $MB);
    my $j = inspect('l-1');
    Test::More::is(join(' ', map { $j->{response}{$_} // '-' } qw(body_bytes pieces piece_size)),
                   20 * $MB . " 21 $PIECE", 'the inspection tells the body size and the pieces');
    new_then_replay('compressible 20 MB', '/l/2?size=' . (20 * $MB), 'l-2', 20 * $MB);
}

# Writes the record of r-1 again, then alters its pieces in Redis with $change.
sub alter_pieces {
    my ($change) = @_;
    my ($rkey, @pieces) = pieces_of('r-1');
    die "no pieces of r-1\n" unless @pieces;
    $change->(@pieces);
}

# A client that reads the status line and leaves while a large response
# trickles in: the response is still kept, whole, and replayed.
sub client_gone {
    my $uri = '/g/1?kind=noise&trickle=0.3&size=' . (8 * $MB);
    Test::More::is(IdempotencyTest::nginx_post($uri, 'g-1'), 201, 'the client saw the status line, then left');
    # the capture goes on without the client: a retry meanwhile meets the
    # claim (409, or a wait for it), never a second execution
    my $retry;
    IdempotencyTest::wait_until(sub { $retry = send_post($uri, 'g-1'); $retry->{status} != 409 }, 30);
    Test::More::is("$retry->{status} " . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 true',
                   'the retry is a replay');
    Test::More::is(length $retry->{body}, 8 * $MB, 'of the whole body');
    Test::More::is(IdempotencyTest::upstream_count('/g/1'), 1, 'executed once');
}

# Among neighbours: a retry over HTTP/2, and one that gzip compresses on
# the way out, are streamed from the pieces as an HTTP/1.1 one is.
sub neighbours {
    my $size = 4 * $MB + 7;
    my $uri = "/h/1?kind=noise&status=200&size=$size";    # gzip compresses a 200, not a 201
    my $first = send_post($uri, 'h-1');
    Test::More::is($first->{status}, 200, 'the original');
    my $h2 = IdempotencyTest::h2_post($ENV{TEST_NGINX_H2_PORT}, $uri, key => 'h-1', body => 'x',
                                      max_time => 30);
    Test::More::is("$h2->{status} " . ($h2->{headers}{'idempotent-replayed'} // '-'), '200 true',
                   'over HTTP/2: a replay');
    Test::More::ok(sha256_hex($h2->{body}) eq sha256_hex($first->{body}), 'over HTTP/2: byte for byte');
    my $gz = IdempotencyTest::post_key($uri, 'h-1', 'Accept-Encoding: gzip');
    Test::More::is("$gz->{status} " . ($gz->{headers}{'content-encoding'} // '-'), '200 gzip', 'gzipped: a replay, gzipped')
        or Test::More::diag(join ', ', map { "$_: $gz->{headers}{$_}" } sort keys %{ $gz->{headers} });
    my $chunked = $gz->{body};
    my $body = '';
    while ($chunked =~ s/\A([0-9a-fA-F]+)\r\n//) {
        my $n = hex $1;
        last if $n == 0;
        $body .= substr($chunked, 0, $n, '');
        $chunked =~ s/\A\r\n//;
    }
    Test::More::ok(sha256_hex(Compress::Zlib::memGunzip($body) // '') eq sha256_hex($first->{body}),
                   'gzipped: byte for byte once gunzipped');
    Test::More::is(IdempotencyTest::upstream_count('/h/1'), 1, 'executed once');
}

# A replay held back by limit_rate: the pieces still all go, at that rate.
sub rate_limited {
    my $size = 3 * $MB + 5;
    my $first = send_post("/rl/1?kind=noise&size=$size", 'rl-1');
    Test::More::is($first->{status}, 201, 'the original');
    my $t0 = Time::HiRes::time();
    my $retry = send_post("/rl/1?kind=noise&size=$size", 'rl-1');
    Test::More::is("$retry->{status} " . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 true', 'a replay');
    Test::More::ok(sha256_hex($retry->{body}) eq sha256_hex($first->{body}), 'whole, byte for byte');
    Test::More::cmp_ok(Time::HiRes::time() - $t0, '>=', 0.8, 'at about the rate (3 MB at 2 MB/s after the first 1 MB)');
}

sub small_pieces {
    my (@more) = @_;
    return location_conf('/', 'idempotency on', 'idempotency_max_response_size 64m', 'idempotency_piece_size 64k',
                         @more,
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('/_count/', 'proxy_pass http://backend');
}

# The pieces of $key's record, on whatever Redis holds its slot: (port, keys).
sub piece_keys {
    my ($key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my ($at) = Idem::Store::on_cluster() ? IdempotencyTest::cluster_owner($rkey) : (IdempotencyTest::redis_port());
    my @keys = sort grep { index($_, "{$rkey}:p") == 0 } @{ IdempotencyTest::redis_command_at($at, 'KEYS', '*') };
    return ($at, @keys);
}

# $tries retries of $key, each answered $status (what the design gives for
# the fault under it), by workers that all live through them. The retries
# share one keep-alive connection, as a client's pool does: a request the
# module ended is then freed at once, the connection kept for the next.
sub retries_answered {
    my ($key, $uri, $status, $tries) = @_;
    my @workers = IdempotencyTest::worker_pids();
    my @answers;
    my $pool = Idem::HTTP::pool_new(concurrency => 1, on_done => sub { push @answers, $_[1] });
    Idem::HTTP::pool_submit($pool, { port => IdempotencyTest::nginx_port(), method => 'POST', path => $uri,
                                      headers => [['Idempotency-Key', $key]], body => 'x' }) for 1 .. $tries;
    Idem::HTTP::pool_run($pool, time + 30);
    for my $i (1 .. $tries) {
        my $res = $answers[$i - 1] // { error => 'no answer' };
        Test::More::is(($res->{status} // $res->{error}) . ' ' . ($res->{headers}{'x-idempotency-status'} // '-'),
                       $status, "retry $i of $key: $status");
    }
    my $alive = IdempotencyTest::read_response(IdempotencyTest::send_request(
        "GET /_count/none HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
    Test::More::is($alive->{status}, 200, 'the gateway still answers');
    Test::More::is(join(' ', IdempotencyTest::worker_pids()), join(' ', @workers), 'no worker died answering them');
}

# The original of $key (300 KB in five pieces), then $fault done to its
# pieces in the store, then retries that each get $status.
sub lost_pieces {
    my ($key, $fault, $status) = @_;
    my $uri = "/lp/$key?kind=noise&size=$SMALL";
    my $first = send_post($uri, $key);
    Test::More::is("$first->{status} $first->{headers}{'x-idempotency-status'}", '201 new', "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    my ($at, @pieces) = piece_keys($key);
    Test::More::is(scalar @pieces, 5, "$key: kept in five pieces");
    $fault->($at, @pieces);
    retries_answered($key, $uri, $status, 4);
    Test::More::is(IdempotencyTest::upstream_count("/lp/$key"), 1, "$key: never executed again");
}

sub drop_piece {
    my ($index) = @_;
    return sub { my ($at, @pieces) = @_; IdempotencyTest::redis_command_at($at, 'DEL', $pieces[$index]) };
}

sub piece_of_wrong_type {
    my ($at, @pieces) = @_;
    IdempotencyTest::redis_command_at($at, 'DEL', $pieces[2]);
    IdempotencyTest::redis_command_at($at, 'RPUSH', $pieces[2], 'not a piece');
}

# The look at the pieces meets Redis failing it ($mode: cut, the
# connection closes mid-reply; stall, no answer within the timeout).
sub look_fails {
    my ($key, $mode) = @_;
    my $uri = "/lf/$key?kind=noise&size=$SMALL";
    Test::More::is(send_post($uri, $key)->{status}, 201, "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    Idem::FaultProxy::fault_proxy_mode($PROXY, $mode, 2000, $LOOK);
    retries_answered($key, $uri, '503 unavailable', 3);
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    my $stats = Idem::FaultProxy::fault_proxy_stats($PROXY);
    Test::More::cmp_ok($stats->{faults}, '>=', 1, "$key: the look met the fault ($stats->{faults} times so far)");
    # the connection Redis lost comes back by itself
    my $replay;
    IdempotencyTest::wait_until(sub { $replay = send_post($uri, $key); $replay->{status} != 503 }, 10);
    Test::More::is("$replay->{status} " . length($replay->{body}), "201 $SMALL", "$key: replayed whole once Redis answers");
    Test::More::is(IdempotencyTest::upstream_count("/lf/$key"), 1, "$key: never executed again");
}

# A retry of $key (POST $uri) on a connection of its own to $port, its
# receive buffer small; returns the socket once the response's head has
# come (the look at the pieces passed), and what it read so far.
sub retry_head {
    my ($port, $uri, $key) = @_;
    my $sock = IO::Socket::INET->new(Proto => 'tcp') or die "socket: $!\n";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 16384) or die "SO_RCVBUF: $!\n";
    connect($sock, pack_sockaddr_in($port, inet_aton('127.0.0.1'))) or die "connect: $!\n";
    syswrite($sock, "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                    . "Content-Length: 1\r\n\r\nx") or die "send: $!\n";
    my $buf = '';
    Idem::Wait::read_until($sock, \$buf, sub { index($buf, "\r\n\r\n") >= 0 }, "the head of the retry of $key");
    return ($sock, $buf);
}

# The rest of a response, to the end of the connection (within 30 s): its
# head and its body as far as they came.
sub read_rest {
    my ($sock, $buf) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = time + 30;
    while (time < $deadline) {
        next unless $sel->can_read($deadline - time);
        my $n = sysread($sock, $buf, 65536, length $buf);
        last unless $n;
    }
    close $sock;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    my ($length) = $head =~ /^Content-Length: (\d+)\r?$/mi;
    return { head => $head, body => $body // '', length => $length };
}

# A piece of the response of $key changed in the store (Redis, the cluster)
# after the retry's look passed, before the replay read it: a piece kept as
# a zstd frame made one of its body bytes as they are (or the other way
# round), a valid piece of another size. The retry's client reads slowly (a listener of a small
# send buffer, a small receive buffer), so the replay reads that piece,
# the 31st of 46, long after the look. The replay is cut off there.
sub piece_changed {
    my ($key) = @_;
    my $uri = "/pc/$key?size=3000000";
    Test::More::is(send_post($uri, $key)->{status}, 201, "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    my ($at, @pieces) = piece_keys($key);
    Test::More::is(scalar @pieces, 46, "$key: kept in 46 pieces");
    my ($sock, $buf) = retry_head($ENV{TEST_NGINX_SLOW_PORT}, $uri, $key);
    my $value = IdempotencyTest::redis_command_at($at, 'GET', $pieces[30]);
    my $zstd = ord(substr($value, 25, 1));    # its form, after its name (module/pieces.hpp)
    my $payload = Idem::Proc::tmpdir() . '/payload';
    open my $fh, '>', $payload or die "$payload: $!\n";
    print {$fh} substr($value, 26);
    close $fh;
    my $other = $zstd ? `zstd -q -d -c $payload` : `zstd -q -1 -c $payload`;
    die "zstd failed\n" if $? || !length $other;
    Test::More::isnt(length $other, length($value) - 26, "$key: the piece made one of another size");
    IdempotencyTest::redis_command_at($at, 'SET', $pieces[30], substr($value, 0, 25) . chr(1 - $zstd) . $other, 'KEEPTTL');
    my $res = read_rest($sock, $buf);
    Test::More::like($res->{head}, qr{\AHTTP/1\.1 201 }, "$key: the retry is a replay");
    Test::More::is("$res->{length} " . length $res->{body}, '3000000 ' . 30 * 65408,
                   "$key: ... cut off after the 30 pieces before the one changed");
    Test::More::is(IdempotencyTest::upstream_count("/pc/$key"), 1, "$key: never executed again");
}

# A piece of $key's response replaced in the store after the retry's look
# passed, before the replay read it, by a valid piece of the same size
# (the responses are noise: every full piece is kept as it is, of one
# size): the piece before it, or the same piece of $other's response. The
# look saw the right names and sizes; the read finds another piece there,
# never sent in its place. The retry's client reads slowly, as in
# piece_changed. The replay is cut off there.
sub piece_swapped {
    my ($key, $other) = @_;
    my $uri = "/ps/$key?kind=noise&size=3000000";
    Test::More::is(send_post($uri, $key)->{status}, 201, "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    my ($at, @pieces) = piece_keys($key);
    Test::More::is(scalar @pieces, 46, "$key: kept in 46 pieces");
    my ($from, $name);
    if (defined $other) {
        my $other_uri = "/ps/$other?kind=noise&size=3000000";
        Test::More::is(send_post($other_uri, $other)->{status}, 201, "$other: another original");
        Idem::Store::stored($other, 'response') or die "the record of $other never landed\n";
        my ($other_at, @others) = piece_keys($other);
        $from = IdempotencyTest::redis_command_at($other_at, 'GET', $others[30]);
        $name = "piece 30 of $other";
    } else {
        $from = IdempotencyTest::redis_command_at($at, 'GET', $pieces[29]);
        $name = 'piece 29';
    }
    my ($sock, $buf) = retry_head($ENV{TEST_NGINX_SLOW_PORT}, $uri, $key);
    my $own = IdempotencyTest::redis_command_at($at, 'GET', $pieces[30]);
    Test::More::is(length $from, length $own, "$key: $name is of the size of piece 30");
    Test::More::isnt($from, $own, "$key: ... and not the same");
    IdempotencyTest::redis_command_at($at, 'SET', $pieces[30], $from, 'KEEPTTL');
    my $res = read_rest($sock, $buf);
    Test::More::like($res->{head}, qr{\AHTTP/1\.1 201 }, "$key: the retry is a replay");
    Test::More::is("$res->{length} " . length $res->{body}, '3000000 ' . 30 * 65408,
                   "$key: ... cut off after the 30 pieces before the one replaced by $name");
    Test::More::is(IdempotencyTest::upstream_count("/ps/$key"), 1, "$key: never executed again");
}

# The read of the third piece (its key's index 00000002) held back by
# Redis for 3 s, past idempotency_redis_timeout: the replay is cut off
# after the two pieces before it, once the timeout passed.
sub read_stalls {
    my ($key) = @_;
    my $uri = "/lp/$key?kind=noise&size=$SMALL";
    Test::More::is(send_post($uri, $key)->{status}, 201, "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'stall', 3000, ':00000002');
    my $t0 = time;
    my $res = read_rest(retry_head(IdempotencyTest::nginx_port(), $uri, $key));
    my $took = time - $t0;
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    Test::More::like($res->{head}, qr{\AHTTP/1\.1 201 }, "$key: the retry is a replay");
    Test::More::is("$res->{length} " . length $res->{body}, "$SMALL " . 2 * 65408,
                   "$key: ... cut off after the two pieces before the one Redis holds back");
    Test::More::cmp_ok($took, '<', 2.5, sprintf("$key: ... once idempotency_redis_timeout passed (%.2f s)", $took));
    Test::More::cmp_ok(Idem::FaultProxy::fault_proxy_stats($PROXY)->{stalled}, '>=', 1, "$key: the read was held back");
}

# The client of a replay leaves while the read of the third piece is held
# back by Redis (1.5 s): the request is freed then, and Redis's late answer
# is dropped (a use after free otherwise: the ASan run tells).
sub client_leaves_during_read {
    my ($key) = @_;
    my $uri = "/lp/$key?kind=noise&size=$SMALL";
    Test::More::is(send_post($uri, $key)->{status}, 201, "$key: the original");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    my @workers = IdempotencyTest::worker_pids();
    my $before = Idem::FaultProxy::fault_proxy_stats($PROXY)->{late} // 0;
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'stall', 1500, ':00000002');
    my ($sock, $buf) = retry_head(IdempotencyTest::nginx_port(), $uri, $key);
    Idem::Wait::read_until($sock, \$buf, sub { length($buf) - index($buf, "\r\n\r\n") - 4 >= 2 * 65408 },
                           "$key: the two pieces before the one held back");
    close $sock;
    Test::More::ok(IdempotencyTest::wait_until(sub { Idem::FaultProxy::fault_proxy_stats($PROXY)->{late} > $before }, 5),
                   "$key: Redis answered the read after the client left");
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    my $replay = send_post($uri, $key);
    Test::More::is("$replay->{status} " . length $replay->{body}, "201 $SMALL", "$key: the next retry is replayed whole");
    Test::More::is(join(' ', IdempotencyTest::worker_pids()), join(' ', @workers), "$key: no worker died");
}

# The pieces' life (module/piece_writer.cpp). Written, a piece lives
# idempotency_ttl (1h here) and an hour (capture_margin_ms): it outlives the
# record that lands after it, however long the response takes. Once the
# record landed, every piece is set to expire a minute after it
# (settled_margin_ms), not an hour: what a store holds for a response in
# pieces lasts as long as its record, and a minute.
sub pieces_outlive {
    my ($key) = @_;
    my $uri = "/lt/$key?size=300000&chunked=1&trickle=1&gate=$key";
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = Idem::Live::post(IdempotencyTest::nginx_port(), $uri, $key);
    $original->body_length(75000);
    my ($at, $first);
    IdempotencyTest::wait_until(sub { ($at, $first) = piece_keys($key); defined $first }, 10)
        or die "the first piece of $key never landed\n";
    my $written = IdempotencyTest::redis_command_at($at, 'PTTL', $first);
    Test::More::cmp_ok($written, '>', 7_200_000 - 2000, "$key: a piece is written to live idempotency_ttl and an hour ($written ms)");
    Test::More::ok(IdempotencyTest::wait_until(sub { IdempotencyTest::redis_command_at($at, 'PTTL', $first) <= $written - 1000 }, 5),
                   "$key: ... a second passes before the record lands");
    Idem::Live::open_gate($key, 4);
    Test::More::ok($original->finish->{complete}, "$key: the original ends whole");
    Idem::Store::stored($key, 'response') or die "the record of $key never landed\n";
    # the pieces' new expiry follows the record's answer: awaited
    my (undef, @pieces) = piece_keys($key);
    my @margins;
    IdempotencyTest::wait_until(sub {
        my $record = IdempotencyTest::redis_command_at($at, 'PTTL', $rkey);
        @margins = map { IdempotencyTest::redis_command_at($at, 'PTTL', $_) - $record } @pieces;
        return 5 == grep { abs($_ - 60_000) < 300 } @margins;
    }, 5);
    Test::More::is(scalar(grep { abs($_ - 60_000) < 300 } @margins), 5,
                   "$key: once it landed, each of the 5 pieces outlives the record by a minute, not an hour (@margins ms)");
}

# A record of version 4 made by hand under $key, as anyone who can write to
# Redis can: $count pieces of $size bytes of zeros, each one zstd frame
# (a few KB however large), listed with the fingerprint and status of the
# record $key holds now (its original's).
sub crafted_pieces {
    my ($key, $count, $size) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $found = IdempotencyTest::redis_command('GET', $rkey) // die "no record under $key\n";
    my ($fingerprint, $status) = (substr($found, 5, 32), 201);
    my $zeros = Idem::Proc::tmpdir() . '/zeros';
    open my $fh, '>', $zeros or die "$zeros: $!\n";
    truncate $fh, $size or die "truncate: $!\n";
    close $fh;
    my $frame = `zstd -q -1 -c $zeros`;
    die "zstd failed\n" if $? || !length $frame;
    my $id = 'crafted-pieces!!';    # 16 bytes
    my @values = map { "IDM\x04\x04" . $id . pack('N', $_) . "\x01" . $frame } 0 .. $count - 1;
    my $record = "IDM\x04\x02" . $fingerprint . $id . pack('N N Q>', $count, $size, $count * $size)
               . join('', map { pack('N', length $_) } @values) . "\x01" . pack('n n N', $status, 0, 0);
    my $base = "{$rkey}:p" . unpack('H*', $id) . ':';
    IdempotencyTest::redis_command('SET', $base . sprintf('%08x', $_), $values[$_], 'PX', 600000) for 0 .. $count - 1;
    IdempotencyTest::redis_command('SET', $rkey, $record, 'PX', 600000);
}

__DATA__

=== TEST 1: 20 MB responses, incompressible and compressible, are kept in pieces and replayed byte for byte
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::large_everywhere()
--- request
GET /_count/l/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 2: ... and with encryption at rest, each piece sealed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('idempotency_encrypt_key ../html/seal.key')
--- init
main::new_then_replay('sealed', '/s/1?kind=noise&size=' . (3 * $main::MB + 1), 's-1', 3 * $main::MB + 1)
--- request
GET /_count/s/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 3: a client that leaves during a large capture does not stop it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::client_gone()
--- request
GET /_count/g/1
--- error_code: 200
--- response_body: 1



=== TEST 4: a retry over HTTP/2, and one gzip compresses, are streamed from the pieces byte for byte
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"listen 127.0.0.1:$ENV{TEST_NGINX_H2_PORT} http2;\n" . main::locations('gzip on', 'gzip_types application/octet-stream')
--- init
main::neighbours()
--- request
GET /_count/h/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 5: a replay held back by limit_rate streams every piece at that rate
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('limit_rate 2m', 'limit_rate_after 1m')
--- init
main::rate_limited()
--- request
GET /_count/rl/1
--- error_code: 200
--- response_body: 1
--- timeout: 30



=== TEST 6: in Redis: a record of version 4, and pieces on its slot that outlive it
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::in_redis()
--- request
GET /_count/r/1
--- error_code: 200
--- response_body: 1



=== TEST 7: a piece missing: 410, logged, never executed again
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::alter_pieces(sub { IdempotencyTest::redis_command('DEL', $_[3]) });
--- request eval
"POST /r/1?kind=noise&size=" . (5 * $main::MB + 123) . "\nx"
--- more_headers
Idempotency-Key: r-1
--- error_code: 410
--- response_headers
!Idempotent-Replayed
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" is not replayed: its piece 3 of 6 is missing/



=== TEST 8: a piece of another response put in place of one (stale): 410, never executed again
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::new_then_replay('another', '/r/2?kind=noise&size=' . (5 * $main::MB + 123), 'r-2', 5 * $main::MB + 123);
my (undef, @other) = main::pieces_of('r-2');
main::alter_pieces(sub { IdempotencyTest::redis_command('SET', $_[1], IdempotencyTest::redis_command('GET', $other[1])) });
--- request eval
"POST /r/1?kind=noise&size=" . (5 * $main::MB + 123) . "\nx"
--- more_headers
Idempotency-Key: r-1
--- error_code: 410
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*its piece 1 of 6 is missing, of another response, or altered/



=== TEST 9: ... and neither was executed again
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- request
GET /_count/r/1
--- error_code: 200
--- response_body: 1



=== TEST 10: a piece size out of bounds is refused by nginx -t
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / { idempotency on; idempotency_piece_size 16k; proxy_pass http://backend; }
--- must_die
--- error_log
"idempotency_piece_size" must be between 64k and 64m



=== TEST 11: a key prefix whose '}' closes no hash tag is refused where responses may be kept in pieces
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / { idempotency on; idempotency_max_response_size 64m; idempotency_key_prefix "a}b:"; proxy_pass http://backend; }
--- must_die
--- error_log
"idempotency_key_prefix" "a}b:" has a '}' outside a hash tag



=== TEST 12: a piece lost from the store (eviction, a flushed replica): every retry 410, and every worker lives
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::small_pieces()
--- init
main::lost_pieces('lp-1', main::drop_piece(1), '410 unreplayable');
main::lost_pieces('lp-2', main::drop_piece(4), '410 unreplayable');
--- request
GET /_count/lp/lp-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[error\] .*its piece 4 of 5 is missing, of another response, or altered/
--- no_error_log
exited on signal
[alert]



=== TEST 13: a piece of the wrong type (WRONGTYPE during the look): every retry 503, and every worker lives
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::small_pieces()
--- init
main::lost_pieces('wt-1', \&main::piece_of_wrong_type, '503 unavailable');
--- request
GET /_count/lp/wt-1
--- error_code: 200
--- response_body: 1
--- error_log
WRONGTYPE
--- no_error_log
exited on signal
[alert]



=== TEST 14: Redis gone during the look at the pieces: every retry 503, and every worker lives
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::small_pieces('idempotency_redis_timeout 500ms')
--- init
main::look_fails('lf-1', 'cut');
--- request
GET /_count/lf/lf-1
--- error_code: 200
--- response_body: 1
--- no_error_log
exited on signal
[alert]



=== TEST 15: the look at the pieces timing out: every retry 503, and every worker lives
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::small_pieces('idempotency_redis_timeout 500ms')
--- init
main::look_fails('lf-2', 'stall');
--- request
GET /_count/lf/lf-2
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[error\] .*the store did not answer within idempotency_redis_timeout for the pieces of "idem:[0-9a-f]{64}"/
--- no_error_log
exited on signal
[alert]



=== TEST 16: a record listing pieces beyond the location's limits: 410, never a byte of them sent
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::small_pieces() . main::location_conf('/d/', 'idempotency on', 'proxy_pass http://backend')
--- init
# at the defaults (1m, no pieces): eight pieces of 64 MB, 19 KB of Redis
Test::More::is(IdempotencyTest::nginx_post('/d/1?size=100', 'cp-1'), 201, 'the original, kept whole');
main::crafted_pieces('cp-1', 8, 64 * 1024 * 1024);
Test::More::is(IdempotencyTest::nginx_post('/d/1?size=100', 'cp-1'), 410, 'eight pieces of 64 MB at the defaults: 410');
# where pieces of 64k are kept: two of 1 MB, a body well within its 64m
Test::More::is(IdempotencyTest::nginx_post('/lp/cp-2?kind=noise&size=' . $main::SMALL, 'cp-2'), 201, 'the original');
Idem::Store::stored('cp-2', 'response') or die "the record of cp-2 never landed\n";
main::crafted_pieces('cp-2', 2, 1024 * 1024);
Test::More::is(IdempotencyTest::nginx_post('/lp/cp-2?kind=noise&size=' . $main::SMALL, 'cp-2'), 410,
               'pieces of 1 MB where the piece size is 64k: 410');
--- request
GET /_count/d/1
--- error_code: 200
--- response_body: 1
--- error_log eval
[qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: its response is larger than idempotency_max_response_size allows here/,
 qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: it is kept in pieces larger than idempotency_piece_size allows here/]



=== TEST 17: a piece changed in the store after the look, before the replay read it (a valid piece of another size): the replay is cut off there
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"listen 127.0.0.1:$ENV{TEST_NGINX_SLOW_PORT} sndbuf=16k;\n" . main::small_pieces()
--- init
main::piece_changed('pc-1');
--- request
GET /_count/pc/pc-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[error\] .*the replay of "idem:[0-9a-f]{64}" is cut off at piece 30 of 46: it is not of the size the record lists/



=== TEST 18: Redis holding back a piece's read after the header: the replay is cut off once idempotency_redis_timeout passed
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::small_pieces('idempotency_redis_timeout 500ms')
--- init
main::read_stalls('rs-1');
--- request
GET /_count/lp/rs-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[error\] .*the store did not answer within idempotency_redis_timeout for the pieces of "idem:[0-9a-f]{64}"/
--- no_error_log
[alert]



=== TEST 19: a client that leaves while a piece's read is at the store: Redis's late answer is dropped, and every worker lives
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
--- config eval
main::small_pieces()
--- init
main::client_leaves_during_read('cl-1');
--- request
GET /_count/lp/cl-1
--- error_code: 200
--- response_body: 1
--- no_error_log
[alert]



=== TEST 20: pieces outlive their record by an hour as written (were the settle's expiry lost), and by a minute from the record's landing on
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::small_pieces('idempotency_ttl 1h', 'proxy_buffering off')
--- init
main::pieces_outlive('lt-1');
--- request
GET /_count/lt/lt-1
--- error_code: 200
--- response_body: 1



=== TEST 21: a piece replaced after the look by a valid one of the same size, the one before it or the same of another response: the replay is cut off there
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"listen 127.0.0.1:$ENV{TEST_NGINX_SLOW_PORT} sndbuf=16k;\n" . main::small_pieces()
--- init
main::piece_swapped('ps-1');
main::piece_swapped('ps-2', 'ps-3');
--- request
GET /_count/ps/ps-1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[error\] .*the replay of "idem:[0-9a-f]{64}" is cut off at piece 30 of 46: it is not that piece of this response/


=== TEST 22: a purged record's pieces go with it
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
Test::More::is(main::send_post('/pp/1?size=3000000', 'pp-1')->{status}, 201, 'pp-1: a response kept in pieces');
Idem::Store::stored('pp-1', 'response') or die "the record of pp-1 never landed\n";
my (undef, @pieces) = main::piece_keys('pp-1');
Test::More::is(scalar @pieces, 3, 'pp-1: its 3 pieces are there');
my $purge = IdempotencyTest::read_response(IdempotencyTest::send_request(
    "DELETE /_admin?force=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: pp-1\r\n\r\n"));  # the admin location has the default limits: not judged there
Test::More::is($purge->{status}, 200, 'pp-1: purged') or Test::More::diag($purge->{body});
Test::More::ok(IdempotencyTest::wait_until(sub { my (undef, @left) = main::piece_keys('pp-1'); !@left }, 5),
               'pp-1: ... and its pieces with it');
--- request
GET /_count/pp/1
--- response_body: 1


=== TEST 23: ... a sealed one's too, where the endpoint has the key that opens it (nothing of it shown)
--- shared_store
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('idempotency_encrypt_key ../html/seal.key')
--- init
Test::More::is(main::send_post('/pp/2?size=3000000', 'pp-2')->{status}, 201, 'pp-2: a response kept in pieces');
IdempotencyTest::wait_until(sub { (main::inspect('pp-2')->{state} // '') eq 'stored' }, 10)
    or die "the record of pp-2 never landed\n";
my (undef, @pieces) = main::piece_keys('pp-2');
Test::More::is(scalar @pieces, 3, 'pp-2: its 3 pieces are there');
my $purge = IdempotencyTest::read_response(IdempotencyTest::send_request(
    "DELETE /_admin?force=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: pp-2\r\n\r\n"));  # the admin location has the default limits: not judged there
Test::More::is($purge->{status}, 200, 'pp-2: purged') or Test::More::diag($purge->{body});
Test::More::ok(IdempotencyTest::wait_until(sub { my (undef, @left) = main::piece_keys('pp-2'); !@left }, 5),
               'pp-2: ... and its pieces with it');
--- request
GET /_count/pp/2
--- response_body: 1
