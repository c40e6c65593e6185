#!/usr/bin/env perl
# fuzz-gateway.pl — the replay path fuzzed through a real nginx (make
# fuzz-gateway; t/README.md#fuzzing). What a store holds is untrusted input:
# this writes crafted and mutated records, pieces and live logs under real
# keys and checks what the gateway makes of them.
#
# 1. Starts, on loopback, a private Redis, the counting upstream
#    (scripts/upstream.pl) and nginx (2 workers) with the module's ASan+UBSan
#    build (build/asan/, scripts/asan-build.sh, which alone has the test hook
#    idempotency_test_store_raw: raw bytes under any key of the zone store).
#    Two virtual servers of one server_name, so that their store keys are the
#    same: one on Redis, one on the zone store, each with the same locations
#    (plain, with trailers, compressed, with a dictionary, sealed, in pieces,
#    sealed pieces, a small size limit, a live event stream with
#    idempotency_wait), the operator's endpoint and the raw hook.
# 2. Seeds: drives the Redis gateway to write real records of every kind —
#    a claim in flight, plain responses (small, many headers, trailers, a
#    404), compressed ones (with a dictionary too), sealed ones, responses in
#    pieces (record version 4 and its piece keys), sealed pieces, an
#    unreplayable marker (plain, and one that says why), the live log of an
#    event stream (in flight, whole)
#    — and reads them back from Redis. --write-seeds DIR writes them out
#    (fuzz/corpus/gateway/ holds a committed set); the committed set is also
#    read in as splice material.
# 3. Each iteration takes a seed case, mutates it (bytes, fields by name,
#    versions, cut heads, splices, transplants, zstd frames that open into
#    crafted records, pieces deleted, swapped, renamed or of another
#    response, live logs rebuilt frame by frame), writes it under the case's
#    real keys (Redis: SET; zone: PUT to the raw hook), then sends some of: the
#    retry, two at once, one that leaves mid-response, joiners while a live
#    log is there, the operator's inspection (GET) and purge (DELETE).
# 4. Checks every answer against docs/design.md: a replay (marked
#    Idempotent-Replayed: true, a final status — a 1xx is not one; for a
#    plain record its status and body; for plain pieces their bytes; for an
#    unaltered seed the first answer exactly), or 409, 410, 422, 503 as
#    problem documents (the operator: 200, 400, 404, 409, 503, one JSON
#    object); cut short only where the design cuts (pieces, joiners). Then,
#    once every request is in the access log and both workers wait in
#    epoll (a report is written whole by then): no sanitizer report
#    (Idem::Nginx's asan_new_reports), no worker exited on a signal and no
#    [alert]/[crit] line, no execution of the upstream at all (every key
#    fuzzed holds a record: its log gains no line; a self-check at the
#    start proves it tells; at the end each path's count, Idem::Upstream's,
#    is the one of its seeding), and each worker's VmRSS within --rss-mb of
#    its baseline (below).
# 5. Prints progress every 15 s and a summary; each finding's input (the
#    bytes written, under which keys, the requests, the answers, the report;
#    and the iteration before, as a report can surface just after its
#    request) goes to the findings directory, from which --replay DIR plays
#    it again. Exits 1 on any finding.
#
# Options (and environment):
#   --seconds N   (FUZZ_GATEWAY_SECONDS, 600) fuzzing time, split among the stores
#   --store S     (FUZZ_GATEWAY_STORE, both) redis, zone or both
#   --seed N      (FUZZ_GATEWAY_SEED, from the clock) the mutations' random seed
#   --findings D  (FUZZ_GATEWAY_FINDINGS, build/fuzz-gateway/findings)
#   --rss-mb N    (FUZZ_GATEWAY_RSS_MB, 64) a worker's VmRSS bound above its baseline
#   --write-seeds DIR   write the seeds of this run to DIR (and fuzz as asked)
#   --replay DIR  play a finding's input again, --repeat times (5; no seeding,
#                 no fuzzing); exits 1 if any round had a finding
#   --keep        keep the temp dir (logs, ASan reports)
#   --skip-ops RE (FUZZ_GATEWAY_SKIP_OPS) mutations whose description matches
#                 RE are not made (a known finding kept out while its fix is pending)
#
# The RSS bound (64 MB above a worker's VmRSS after seeding): a worker holds
# per request at most its location's limits — the largest is the pieces
# location's idempotency_max_response_size (8m), which a compressed record
# may open into (max_plain_record: 8m + 256k), or one piece (64k) of a
# replay in pieces — and the harness has at most 2 requests in flight, so
# about 17 MB of live requests; ASan keeps freed blocks in quarantine (16 MB
# here: quarantine_size_mb=16) and its allocator keeps what it once mapped;
# the zone (16m) counts in VmRSS as the worker touches it. 17 + 16 + 16 =
# 49 MB, rounded up to 64 for the allocator's size classes and nginx's
# pools. A worker over it holds memory no request accounts for. (Measured:
# 20 to 25 MB over the baseline after a minute, flat after. A worker that
# writes a sanitizer report loads the symbolizer's tables, some 35 MB: its
# baseline is taken again after the report.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib";
use lib $FindBin::Bin;

use Digest::SHA qw(sha256_hex);
use Errno qw(EINTR EAGAIN EWOULDBLOCK);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use File::Path qw(make_path remove_tree);
use Getopt::Long qw(GetOptions);
use IO::Socket::INET;
use JSON::PP ();
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time);

use Bodies ();
use FuzzRecords ();
use Idem::CrashSentinel ();
use Idem::HTTP ();
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();
use Idem::Upstream ();
use Idem::Wait ();

use constant {
    SERVER_NAME     => 'fuzz',
    KEY_PREFIX      => 'idem:',
    RECORD_TTL_MS   => 600_000,   # a record outlives any iteration
    LIVE_TTL_MS     => 3_000,     # a live log that never ends is gone soon: its joiners are cut
    REQUEST_SECS    => 20,        # an answer later than this is a finding
    FINALIZE_SECS   => 20,        # ... and a request not finalized by then
    KEEP_PER_SIG    => 3,         # findings kept with their input, per signature
    MAX_RATE        => 200,       # iterations per second at most (the loop's bound)
    MAX_VALUE       => 1536 * 1024,  # a value written is cut to this (the raw hook takes up to 2m)
    PROGRESS_SECS   => 15,
    RSS_EVERY       => 2,         # seconds between RSS reads
    # A fixed key for idempotency_encrypt_key: the seeds it sealed open in any run.
    SEAL_KEY_TEXT   => 'fuzz-gateway-test-key-not-secret',
};

my $REPO = Idem::Upstream::repo();

my %opt = (
    seconds  => $ENV{FUZZ_GATEWAY_SECONDS} // 600,
    store    => $ENV{FUZZ_GATEWAY_STORE} // 'both',
    seed     => $ENV{FUZZ_GATEWAY_SEED},
    findings => $ENV{FUZZ_GATEWAY_FINDINGS} // "$REPO/build/fuzz-gateway/findings",
    'rss-mb' => $ENV{FUZZ_GATEWAY_RSS_MB} // 64,
);
$opt{'skip-ops'} = $ENV{FUZZ_GATEWAY_SKIP_OPS};
$opt{repeat} = 5;
GetOptions(\%opt, 'seconds=i', 'store=s', 'seed=i', 'findings=s', 'rss-mb=i', 'write-seeds=s', 'replay=s', 'keep',
           'skip-ops=s', 'repeat=i')
    or die "usage: $0 [--seconds N] [--store redis|zone|both] [--seed N] [--findings DIR] [--rss-mb N]"
         . " [--write-seeds DIR] [--replay DIR] [--keep] [--skip-ops REGEX]\n";
die "$0: --store is redis, zone or both\n" unless $opt{store} =~ /^(?:redis|zone|both)$/;
$opt{seed} //= (int(time * 1000) ^ $$) & 0x7fffffff;

# ------------------------------------------------------------ randomness

# Our own generator (xorshift), so that a seed gives the same mutations
# whatever Perl's rand is.
my $rng_state = ($opt{seed} * 2654435761 + 1) & 0xffffffff || 1;
sub rnd {
    my ($n) = @_;
    $rng_state ^= ($rng_state << 13) & 0xffffffff;
    $rng_state ^= $rng_state >> 17;
    $rng_state ^= ($rng_state << 5) & 0xffffffff;
    return $n > 0 ? $rng_state % $n : 0;
}
sub chance { return rnd(1000) < $_[0] * 1000 }
sub one_of { return $_[ rnd(scalar @_) ] }
my $RNG = \&rnd;

# ------------------------------------------------------------ environment

$| = 1;
Idem::Proc::init(prefix => 'fuzz-gateway');
Idem::Proc::keep(1) if $opt{keep};
my $TMP = Idem::Proc::tmpdir();
$ENV{STRESS_ASAN} = 1;
$ENV{STRESS_MODULE} ||= "$REPO/build/asan/ngx_http_idempotency_module.so";
die "fuzz-gateway: $ENV{STRESS_MODULE} is missing: run scripts/asan-build.sh (make fuzz-gateway does)\n"
    unless -e $ENV{STRESS_MODULE};
# A small quarantine keeps the workers' RSS to what they use (the bound
# above); every occurrence of an error is reported, not only the first at
# its place in the code, so that each input that makes it has its report.
$ENV{ASAN_OPTIONS} = 'quarantine_size_mb=16:suppress_equal_pcs=0' . ($ENV{ASAN_OPTIONS} ? ":$ENV{ASAN_OPTIONS}" : '');

print $opt{replay} ? "fuzz-gateway: replay of $opt{replay}, temp dir $TMP\n"
                   : "fuzz-gateway: seed $opt{seed}, store $opt{store}, $opt{seconds} s, temp dir $TMP\n";
Idem::Redis::start_redis();
Idem::Upstream::start_upstream();
my $REDIS_PORT = Idem::Redis::redis_port();
my $UP_PORT = Idem::Upstream::upstream_port();

my $SEAL_KEY = "$TMP/seal.key";
write_file($SEAL_KEY, unpack('H*', SEAL_KEY_TEXT) . "\n");
my $DICT = train_dictionary("$TMP/dict");

my $NG = Idem::Nginx::nginx_start('fuzz', workers => 2, ports => 1, http => \&http_conf, server => \&redis_server_conf);
my %PORT = (redis => $NG->{port}, zone => $NG->{ports}[0]);
my $ACCESS_LOG = "$NG->{dir}/logs/fuzz.log";
print "fuzz-gateway: nginx $NG->{pid} (workers @{[ Idem::Nginx::workers_of($NG->{pid}) ]}), "
    . "redis gateway 127.0.0.1:$PORT{redis}, zone gateway 127.0.0.1:$PORT{zone}, "
    . "Redis 127.0.0.1:$REDIS_PORT, upstream 127.0.0.1:$UP_PORT\n";

sub write_file {
    my ($path, $bytes) = @_;
    open my $fh, '>:raw', $path or die "fuzz-gateway: $path: $!\n";
    print $fh $bytes;
    close $fh or die "fuzz-gateway: $path: $!\n";
}

sub read_file {
    my ($path) = @_;
    open my $fh, '<:raw', $path or return undef;
    local $/;
    return scalar <$fh>;
}

# A dictionary trained on payment objects (deterministic bodies: the same
# dictionary, and id, in every run).
sub train_dictionary {
    my ($dir) = @_;
    make_path("$dir/samples");
    for my $seed (1 .. 60) {
        my ($body) = Bodies::body('payment', 2048, $seed);
        write_file("$dir/samples/$seed.json", $body);
    }
    my $out = `$REPO/scripts/train-dictionary.sh $dir/payment.dict $dir/samples 2>&1`;
    die "fuzz-gateway: training the dictionary failed: $out" if $?;
    return "$dir/payment.dict";
}

sub locations {
    return <<"CONF";
        location /plain/    { idempotency on; idempotency_compress off; proxy_pass http://up; }
        location /trailers/ { idempotency on; idempotency_compress off; add_trailer X-Fuzz-Trailer done; proxy_pass http://up; }
        location /packed/   { idempotency on; proxy_pass http://up; }
        location /dict/     { idempotency on; idempotency_compress_dictionary $DICT; proxy_pass http://up; }
        location /sealed/   { idempotency on; idempotency_encrypt_key $SEAL_KEY; proxy_pass http://up; }
        location /pieces/   { idempotency on; idempotency_max_response_size 8m; idempotency_piece_size 64k; proxy_pass http://up; }
        location /spieces/  { idempotency on; idempotency_max_response_size 8m; idempotency_piece_size 64k;
                              idempotency_encrypt_key $SEAL_KEY; proxy_pass http://up; }
        location /small/    { idempotency on; idempotency_max_response_size 4k; proxy_pass http://up; }
        location /live/     { idempotency on; idempotency_wait 2s; idempotency_compress off;
                              proxy_buffering off; proxy_pass http://up; }
        location = /_idempotency { idempotency_admin; }
        location = /_raw    { idempotency_test_store_raw; client_body_buffer_size 2m; client_max_body_size 2m; }
CONF
}

sub http_conf {
    my ($ng) = @_;
    my $locations = locations();
    return <<"CONF";
    proxy_http_version 1.1;
    log_format fuzz '\$http_x_fuzz_id \$status \$idempotency_status \$bytes_sent';
    access_log $ng->{dir}/logs/fuzz.log fuzz;
    upstream up { server 127.0.0.1:$UP_PORT; }
    idempotency_zone zone=fz:16m;
    server {
        listen 127.0.0.1:$ng->{ports}[0];
        server_name @{[ SERVER_NAME ]};
        idempotency_scope "";
        idempotency_store zone=fz;
$locations
    }
CONF
}

sub redis_server_conf {
    return "        server_name @{[ SERVER_NAME ]};\n        idempotency_scope \"\";\n        idempotency_redis 127.0.0.1:$REDIS_PORT;\n" . locations();
}

# The store key of a client key (module/key_space.hpp: the virtual server
# "N:" + its first server_name, no scope).
sub store_key {
    my ($key) = @_;
    my $space = length(SERVER_NAME) . ':' . SERVER_NAME;
    return KEY_PREFIX . sha256_hex(length($space) . ':' . $space . $key);
}

# A piece's key (module/pieces.hpp): the store key made a hash tag, ":p",
# the id in hex, ':', the index in 8 hex digits.
sub piece_key {
    my ($skey, $id, $index) = @_;
    return '{' . $skey . '}:p' . unpack('H*', substr($id, 0, 16)) . ':' . sprintf('%08x', $index);
}

sub live_key { my ($skey, $token) = @_; return $skey . unpack('H*', $token) }

# ------------------------------------------------------------ Redis, pipelined

my ($RSOCK, $RBUF);
sub redis_pipe {
    my (@cmds) = @_;
    for my $attempt (1, 2) {
        $RSOCK //= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $REDIS_PORT, Proto => 'tcp', Timeout => 5)
            or die "fuzz-gateway: Redis: $!\n";
        $RBUF = '';
        my $out = join '', map { '*' . @$_ . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @$_) } @cmds;
        my @replies;
        my $ok = eval {
            $RSOCK->autoflush(1);
            print {$RSOCK} $out or die "write: $!\n";
            push @replies, Idem::Redis::parse_resp($RSOCK, \$RBUF) for @cmds;
            1;
        };
        return @replies if $ok;
        close $RSOCK;
        undef $RSOCK;
        die "fuzz-gateway: Redis: $@" if $attempt == 2;
    }
}
sub redis_get { my ($k) = @_; return (redis_pipe([ 'GET', $k ]))[0] }

# ------------------------------------------------------------ HTTP

my $REQ_SEQ = 0;

sub uri_escape { my ($s) = @_; $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge; return $s }

# Requests at once, each on a connection of its own (Connection: close),
# read to their end, or to leave_after bytes (then closed: reset with rst),
# or to the time limit. Each answer: raw, eof, left, timed_out, error, then
# what parse_answer makes of it.
sub exchange {
    my ($reqs, $secs) = @_;
    $secs //= REQUEST_SECS;
    my @st;
    for my $req (@$reqs) {
        my $s = { req => $req, raw => '', t0 => time };
        push @st, $s;
        my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $req->{port}, Proto => 'tcp', Timeout => 5);
        if (!$sock) { $s->{error} = "connect: $!"; $s->{done} = 1; next }
        my $bytes = Idem::HTTP::request_bytes({ %$req, close => 1 });
        my $sent = 0;
        while ($sent < length $bytes) {
            my $n = syswrite($sock, $bytes, length($bytes) - $sent, $sent);
            if (!defined $n) { next if $! == EINTR; $s->{error} = "write: $!"; last }
            $sent += $n;
        }
        if ($s->{error}) { close $sock; $s->{done} = 1; next }
        my $flags = fcntl($sock, F_GETFL, 0);
        fcntl($sock, F_SETFL, $flags | O_NONBLOCK);
        $s->{sock} = $sock;
        leave($s) if defined $req->{leave_after} && $req->{leave_after} == 0;
    }
    my $deadline = time + $secs;
    while (grep { !$_->{done} } @st) {
        my $left = $deadline - time;
        if ($left <= 0) {
            for my $s (grep { !$_->{done} } @st) { $s->{timed_out} = 1; $s->{done} = 1; close $s->{sock} }
            last;
        }
        my $rin = '';
        vec($rin, fileno $_->{sock}, 1) = 1 for grep { !$_->{done} } @st;
        my $n = select(my $rout = $rin, undef, undef, $left < 0.5 ? $left : 0.5);
        next unless $n && $n > 0;
        for my $s (grep { !$_->{done} && vec($rout, fileno $_->{sock}, 1) } @st) {
            my $got = sysread($s->{sock}, $s->{raw}, 65536, length $s->{raw});
            if (!defined $got) {
                next if $! == EINTR || $! == EAGAIN || $! == EWOULDBLOCK;
                $s->{error} = "read: $!";
                $s->{done} = 1;
                close $s->{sock};
            } elsif ($got == 0) {
                $s->{eof} = 1;
                $s->{done} = 1;
                close $s->{sock};
            } elsif (defined $s->{req}{leave_after} && length $s->{raw} >= $s->{req}{leave_after}) {
                leave($s);
            }
        }
    }
    return map { parse_answer($_) } @st;
}

sub leave {
    my ($s) = @_;
    setsockopt($s->{sock}, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) if $s->{req}{rst};
    close $s->{sock};
    $s->{left} = 1;
    $s->{done} = 1;
}

sub parse_answer {
    my ($s) = @_;
    my %a = (id => $s->{req}{id}, raw_len => length $s->{raw}, elapsed => time - $s->{t0},
             map { $_ => $s->{$_} } qw(eof left timed_out error));
    $a{status} = 0;
    my $hend = index($s->{raw}, "\r\n\r\n");
    return \%a if $hend < 0;
    my ($line, @lines) = split /\r\n/, substr($s->{raw}, 0, $hend);
    ($a{status}) = ($line // '') =~ m{^HTTP/1\.[01] (\d{3})};
    $a{status} //= -1;
    my %h;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*?)\s*$/ or next;
        $h{lc $k} = exists $h{lc $k} ? "$h{lc $k}, $v" : $v;
    }
    $a{headers} = \%h;
    $a{head} = substr($s->{raw}, 0, $hend);
    if ($a{status} >= 100 && $a{status} < 200) {
        $a{interim} = 1;
        return \%a;
    }
    my $copy = $s->{raw};
    my $res = $s->{eof} ? Idem::HTTP::parse_response(\$copy, 1, $s->{req}{method}) : undef;
    if ($res && !$res->{error}) {
        $a{complete} = 1;
        $a{body} = $res->{body};
        $a{trailing} = length $copy;
    } else {
        $a{complete} = 0;
        $a{body} = substr($s->{raw}, $hend + 4);
        $a{parse_error} = $res->{error} if $res;
    }
    return \%a;
}

sub request_for {
    my ($case, $store, %o) = @_;
    my $id = sprintf('r%d', ++$REQ_SEQ);
    my @h = ([ 'Idempotency-Key', $case->{key} ], [ 'X-Fuzz-Id', $id ], @{ $o{headers} // [] });
    return { id => $id, port => $PORT{$store}, method => $case->{method}, path => $case->{path},
             body => $case->{body}, headers => \@h, map { $_ => $o{$_} } grep { $_ ne 'headers' } keys %o };
}

sub admin_request {
    my ($case, $store, $method, $query) = @_;
    my $id = sprintf('r%d', ++$REQ_SEQ);
    return { id => $id, port => $PORT{$store}, method => $method, path => '/_idempotency' . ($query // ''),
             headers => [ [ 'Idempotency-Key', $case->{key} ], [ 'X-Fuzz-Id', $id ] ], admin => 1 };
}

# ------------------------------------------------------------ the store's side

# Writes each [key, bytes, ttl_ms] and deletes each key of @$deletes, in
# the store; dies when the store refuses (a harness failure, not a finding).
sub store_write {
    my ($store, $writes, $deletes) = @_;
    if ($store eq 'redis') {
        my @cmds = ((map { [ 'DEL', $_ ] } @$deletes), (map { [ 'SET', $_->[0], $_->[1], 'PX', $_->[2] ] } @$writes));
        return unless @cmds;
        for my $r (redis_pipe(@cmds)) {
            die "fuzz-gateway: Redis refused a write: $r\n" if ref $r eq 'IdempotencyTest::RedisError';
        }
        return;
    }
    my @reqs = ((map { { port => $PORT{zone}, method => 'DELETE', path => '/_raw?key=' . uri_escape($_) } } @$deletes),
                (map { { port => $PORT{zone}, method => 'PUT', path => '/_raw?key=' . uri_escape($_->[0]) . "&ttl=$_->[2]",
                         body => $_->[1] } } @$writes));
    for my $req (@reqs) {    # one at a time: a delete lands before a write of the same key
        my ($a) = exchange([ $req ], 10);
        die "fuzz-gateway: the zone's raw hook answered $a->{status} to $req->{method} $req->{path}"
            . ' (' . length($req->{body} // '') . ' bytes)' . ($a->{error} ? " ($a->{error})" : '') . "\n"
            unless $a->{status} == 200;
    }
}

sub store_read {
    my ($store, $key) = @_;
    return redis_get($key) if $store eq 'redis';
    my ($a) = exchange([ { port => $PORT{zone}, method => 'GET', path => '/_raw?key=' . uri_escape($key) } ], 10);
    return $a->{status} == 200 ? $a->{body} : undef;
}

# ------------------------------------------------------------ seeds

my @CASES;        # the seed cases: what a request is, and what its keys hold
my @MATERIAL;     # every seed value, for splices
my %CRAFTED;      # case name -> compressed records made with the zstd tool around crafted plain records

# A case: name, loc, method, path, body, key, skey, values => [[role, key, bytes], ...],
# expect => {status, body} (a response's first answer), live => 1 (a claim with its live log).
sub new_case {
    my (%c) = @_;
    $c{method} //= 'POST';
    $c{body} //= "amount=$c{name}";
    $c{key} //= "fz-$c{name}";
    $c{skey} = store_key($c{key});
    return \%c;
}

sub seed_response {
    my ($c) = @_;
    my ($a) = exchange([ request_for($c, 'redis') ], 30);
    die "fuzz-gateway: seeding $c->{name}: $c->{path} answered $a->{status}"
        . ($a->{error} ? " ($a->{error})" : '') . "\n" unless $a->{complete} && $a->{status} >= 200 && $a->{status} < 500;
    $c->{expect} = { status => $a->{status}, body => $a->{body} };
    my $rec;
    Idem::Wait::wait_until(sub { $rec = redis_get($c->{skey}); defined $rec && FuzzRecords::kind_of($rec) ne 'record-v1-k1' }, 10)
        or die "fuzz-gateway: seeding $c->{name}: nothing stored under $c->{skey}\n";
    $c->{values} = [ [ 'record', $c->{skey}, $rec ] ];
    # its pieces, if any (a sealed record does not tell them: the keys do)
    my ($keys) = redis_pipe([ 'KEYS', '{' . $c->{skey} . '}:p*' ]);
    for my $pk (sort @$keys) {
        my ($i) = $pk =~ /:([0-9a-f]{8})\z/ or next;
        push @{ $c->{values} }, [ 'piece' . hex($i), $pk, redis_get($pk) ];
    }
    return $c;
}

# A claim caught while its request runs (and, for an event stream, its live log).
sub seed_in_flight {
    my ($c, $final) = @_;
    my $st = Idem::HTTP::open_request(request_for($c, 'redis'));
    die "fuzz-gateway: seeding $c->{name}: $st->{error}\n" if $st->{error};
    my $claim;
    Idem::Wait::wait_until(sub { $claim = redis_get($c->{skey}); defined $claim && FuzzRecords::claim_token($claim) }, 10)
        or die "fuzz-gateway: seeding $c->{name}: no claim under $c->{skey}\n";
    $c->{values} = [ [ 'record', $c->{skey}, $claim ] ];
    my ($partial, $whole);
    if ($c->{live}) {
        my $lk = live_key($c->{skey}, FuzzRecords::claim_token($claim));
        Idem::Wait::wait_until(sub { $partial = redis_get($lk); defined $partial && grep { $_->[0] eq 'B' } FuzzRecords::live_frames($partial) }, 10)
            or die "fuzz-gateway: seeding $c->{name}: no live log under $lk\n";
        my $res = Idem::HTTP::collect_response($st, 30) // die "fuzz-gateway: seeding $c->{name}: no answer\n";
        Idem::Wait::wait_until(sub { $whole = redis_get($lk); defined $whole && grep { $_->[0] eq 'E' } FuzzRecords::live_frames($whole) }, 10)
            or die "fuzz-gateway: seeding $c->{name}: the live log did not end\n";
        push @{ $c->{values} }, [ 'live', $lk, $whole ];
        $c->{partial_log} = $partial;
        $final->{expect} = { status => $res->{status}, body => $res->{body} };
    } else {
        my $res = Idem::HTTP::collect_response($st, 30) // die "fuzz-gateway: seeding $c->{name}: no answer\n";
        $final->{expect} = { status => $res->{status}, body => $res->{body} };
    }
    my $rec;
    Idem::Wait::wait_until(sub { $rec = redis_get($c->{skey}); defined $rec && !FuzzRecords::claim_token($rec) }, 10)
        or die "fuzz-gateway: seeding $c->{name}: the response was not stored\n";
    $final->{values} = [ [ 'record', $c->{skey}, $rec ] ];
    return ($c, $final);
}

sub seed_all {
    my @plain = (
        new_case(name => 'plain-small', loc => 'plain', path => '/plain/small'),
        new_case(name => 'plain-headers', loc => 'plain',
                 path => '/plain/headers?cookies=30&header=X-Fuzz-A:alpha&header=Cache-Control:private'
                       . '&header=Link:%3C/next%3E;rel=next&header=ETag:%22v1%22'),
        new_case(name => 'plain-404', loc => 'plain', path => '/plain/nf?status=404'),
        new_case(name => 'trailers', loc => 'trailers', path => '/trailers/t?chunked=1'),
        new_case(name => 'packed-list', loc => 'packed', path => '/packed/list?kind=list'),
        new_case(name => 'packed-stream', loc => 'packed', path => '/packed/s?kind=transcript&size=20000', sse => 1),
        new_case(name => 'dict-payment', loc => 'dict', path => '/dict/pay?kind=payment&size=2048'),
        new_case(name => 'sealed-payment', loc => 'sealed', path => '/sealed/pay?kind=payment&size=2048'),
        new_case(name => 'sealed-small', loc => 'sealed', path => '/sealed/small'),
        new_case(name => 'pieces-text', loc => 'pieces', path => '/pieces/text?size=307200'),
        new_case(name => 'pieces-noise', loc => 'pieces', path => '/pieces/noise?kind=noise&size=307200'),
        new_case(name => 'sealed-pieces', loc => 'spieces', path => '/spieces/noise?kind=noise&size=150000'),
        new_case(name => 'unreplayable', loc => 'small', path => '/small/over?size=8000', expect_status => 410),
        # a header name that is not a token: the marker that says why (record version 5)
        new_case(name => 'unreplayable-why', loc => 'small', path => '/small/why?raw_header=X%28Y%29:v',
                 expect_status => 410),
    );
    seed_response($_) for @plain;
    $_->{expect}{status} = $_->{expect_status} for grep { $_->{expect_status} } @plain;
    my ($claim, $claim_final) = seed_in_flight(
        new_case(name => 'claim', loc => 'plain', path => '/plain/claim?sleep=2'),
        new_case(name => 'claim-final', loc => 'plain', path => '/plain/claim?sleep=2', key => 'fz-claim', body => 'amount=claim'));
    my ($live, $live_final) = seed_in_flight(
        new_case(name => 'live', loc => 'live', path => '/live/sse?sse=8&gap=0.3', live => 1, sse => 1),
        new_case(name => 'live-final', loc => 'live', path => '/live/sse?sse=8&gap=0.3', key => 'fz-live', body => 'amount=live',
                 sse => 1));
    # the final records share their claim's key: they are cases of their own
    # under it, never fuzzed at once (one iteration at a time)
    $claim->{expect} = { status => 409 };
    my @cases = (@plain, $claim, $claim_final, $live, $live_final);
    for my $c (@cases) {
        my $kinds = join ', ', map { "$_->[0] " . FuzzRecords::kind_of($_->[2]) . ' (' . length($_->[2]) . ' B)' } @{ $c->{values} };
        printf "  seed %-15s %-40s %s\n", $c->{name}, $c->{path}, $kinds;
    }
    return @cases;
}

# Sanity: the seeds as they are, written to a store, are replayed exactly
# (the harness's own check, before anything is mutated).
sub check_seeds {
    my ($store) = @_;
    for my $c (grep { $_->{expect} && !$_->{live} && $_->{expect}{status} != 409 } @CASES) {
        store_write($store, [ map { [ $_->[1], $_->[2], RECORD_TTL_MS ] } @{ $c->{values} } ], []);
        for my $v (@{ $c->{values} }) {
            my $back = store_read($store, $v->[1]);
            die "fuzz-gateway: the $store store does not give back what was written under $v->[1]\n"
                unless defined $back && $back eq $v->[2];
        }
        my ($a) = exchange([ request_for($c, $store) ]);
        my $want = $c->{expect};
        my $ok = $a->{status} == $want->{status}
              && ($want->{status} == 410 || ($a->{complete} && ($a->{headers}{'idempotent-replayed'} // '') eq 'true'
                                             && $a->{body} eq $want->{body}));
        die "fuzz-gateway: the unaltered seed $c->{name} is not replayed on the $store store: "
            . "$a->{status}, not $want->{status}\n" unless $ok;
    }
}

# The seeds of this run, each case a JSON file (its request, its keys) and
# its values; a value over 16 KB (incompressible pieces) is left out and
# named in the JSON: a run makes it afresh.
sub write_seeds {
    my ($dir) = @_;
    make_path($dir);
    for my $c (@CASES) {
        my %meta = (map { $_ => $c->{$_} } qw(name loc method path body key skey));
        for my $v (@{ $c->{values} }) {
            my %e = (role => $v->[0], key => $v->[1], size => length $v->[2], kind => FuzzRecords::kind_of($v->[2]));
            if (length $v->[2] <= 16 * 1024) {
                $e{file} = "$c->{name}.$v->[0]";
                write_file("$dir/$e{file}", $v->[2]);
            }
            push @{ $meta{values} }, \%e;
        }
        if (defined $c->{partial_log}) {   # the live log as it was in flight
            $meta{partial_log} = "$c->{name}.live-partial";
            write_file("$dir/$meta{partial_log}", $c->{partial_log});
        }
        write_file("$dir/$c->{name}.json", JSON::PP->new->canonical->pretty->encode(\%meta));
    }
    print "fuzz-gateway: seeds written to $dir\n";
}

# The committed seeds (fuzz/corpus/gateway/), as splice material.
sub committed_material {
    my $dir = "$REPO/fuzz/corpus/gateway";
    opendir my $dh, $dir or return ();
    my @m = map { read_file("$dir/$_") } grep { !/\.(?:json|md)$|^\./ && -f "$dir/$_" } sort readdir $dh;
    closedir $dh;
    return grep { defined } @m;
}

# Compressed records around crafted plain records: the plain record of a
# seed mutated (lengths, counts, status), then compressed by the zstd tool
# into a well-formed frame — a frame that opens, into bytes that lie. Some
# without a checksum or a content size, some whose head states another
# size or status.
sub craft_compressed {
    my $zstd = qx{sh -c 'command -v zstd'};
    chomp $zstd;
    return unless $zstd;
    my @plain = grep { FuzzRecords::decode_response($_->{values}[0][2]) } @CASES;
    my $n = 0;
    for my $c (grep { $_->{loc} =~ /^(?:packed|dict|sealed|pieces|plain|live)$/ && $_->{expect} } @CASES) {
        my $fp = substr($c->{values}[0][2], 5, 32);
        for my $i (1 .. 12) {
            my $src = $plain[ rnd(scalar @plain) ]{values}[0][2];
            my ($inner, $what) = $i <= 3 ? ($src, 'as it was') : FuzzRecords::mutate_field($src, $RNG);
            $inner = FuzzRecords::set_fingerprint($inner, $fp);
            next unless length $inner > 37;
            my $pv = ord substr($inner, 3, 1);
            my $tail = substr($inner, 37);
            write_file("$TMP/craft.in", $tail);
            my @flags = (one_of([], ['--no-check'], ['--no-content-size'], ($c->{loc} eq 'dict' ? ['-D', $DICT] : [])));
            system($zstd, '-q', '-f', '-1', @{ $flags[0] }, '-o', "$TMP/craft.zst", "$TMP/craft.in") == 0 or next;
            my $frame = read_file("$TMP/craft.zst") // next;
            my $size = length $tail;
            $size += one_of(-1, 1, 1000, -$size) if chance(0.25);
            my $status = length($tail) >= 2 ? unpack('n', substr($tail, 0, 2)) : 200;
            $status = one_of(200, 201, 500, 0) if chance(0.15);
            my $rec = "IDM\x03\x02" . $fp . pack('n', $status) . "\x01" . chr($pv) . pack('N', $size) . $frame;
            push @{ $CRAFTED{ $c->{name} } }, [ $rec, "crafted compressed record (@{ $flags[0] }): inner $what, size $size" ];
            $n++;
        }
    }
    unlink "$TMP/craft.in", "$TMP/craft.zst";
    print "fuzz-gateway: $n compressed records crafted around mutated plain ones\n";
}

# ------------------------------------------------------------ plans

# A plan: what one iteration writes (role => [key, bytes]) and why.
sub base_plan {
    my ($c) = @_;
    my %v = map { $_->[0] => [ $_->[1], $_->[2] ] } @{ $c->{values} };
    return { case => $c, values => \%v, ops => [], identity => 1 };
}


sub mutate_value {
    my ($plan, $role) = @_;
    my $v = $plan->{values}{$role} // return;
    my $r = rnd(10);
    my ($bytes, $what) = $r < 5 ? FuzzRecords::mutate_field($v->[1], $RNG) : FuzzRecords::mutate_bytes($v->[1], $RNG, \@MATERIAL);
    $v->[1] = $bytes;
    push @{ $plan->{ops} }, "$role: $what";
    $plan->{identity} = 0;
}

# Another case's record under ours, its fingerprint made ours (mostly), its
# pieces and live log renamed after our key.
sub transplant {
    my ($plan) = @_;
    my $c = $plan->{case};
    my $o = $CASES[ rnd(scalar @CASES) ];
    return if $o == $c;
    my $rec = $o->{values}[0][2];
    my $patched = chance(0.8);
    $rec = FuzzRecords::set_fingerprint($rec, substr($c->{values}[0][2], 5, 32)) if $patched;
    my %v = (record => [ $c->{skey}, $rec ]);
    if (my $list = FuzzRecords::decode_piece_list($rec)) {
        for my $i (0 .. $list->{count} - 1) {
            my ($p) = grep { $_->[0] eq "piece$i" } @{ $o->{values} };
            $v{"piece$i"} = [ piece_key($c->{skey}, $list->{id}, $i), $p->[2] ] if $p;
        }
    }
    if (my $token = FuzzRecords::claim_token($rec)) {
        my ($l) = grep { $_->[0] eq 'live' } @{ $o->{values} };
        $v{live} = [ live_key($c->{skey}, $token), $l->[2] ] if $l;
    }
    $plan->{values} = \%v;
    $plan->{identity} = 0;
    push @{ $plan->{ops} }, "transplanted $o->{name}'s record" . ($patched ? ' (fingerprint made ours)' : '');
}

sub piece_roles { my ($plan) = @_; return sort { ($a =~ /(\d+)/)[0] <=> ($b =~ /(\d+)/)[0] } grep { /^piece\d+$/ } keys %{ $plan->{values} } }

sub mutate_pieces {
    my ($plan) = @_;
    my @p = piece_roles($plan);
    return mutate_value($plan, 'record') unless @p;
    my $v = $plan->{values};
    my $r = rnd(9);
    my $i = rnd(scalar @p);
    my $role = $p[$i];
    $plan->{identity} = 0;
    if ($r == 0) {
        delete $v->{$role};
        push @{ $plan->{ops} }, "$role deleted";
    } elsif ($r == 1 && @p > 1) {
        my $j = ($i + 1 + rnd(@p - 1)) % @p;
        ($v->{ $p[$i] }[1], $v->{ $p[$j] }[1]) = ($v->{ $p[$j] }[1], $v->{ $p[$i] }[1]);
        push @{ $plan->{ops} }, "$p[$i] and $p[$j] swapped";
    } elsif ($r == 2) {   # one more piece than listed
        my $list = FuzzRecords::decode_piece_list($v->{record}[1]) // return mutate_value($plan, $role);
        $v->{"piece$list->{count}"} = [ piece_key($plan->{case}{skey}, $list->{id}, $list->{count}), $v->{$role}[1] ];
        push @{ $plan->{ops} }, "an extra piece $list->{count}";
    } elsif ($r == 3) {   # a piece of another response under this name
        my @donors = grep { $_ != $plan->{case} && grep { $_->[0] =~ /^piece/ } @{ $_->{values} } } @CASES;
        return mutate_value($plan, $role) unless @donors;
        my $d = $donors[ rnd(scalar @donors) ];
        my @dp = grep { $_->[0] =~ /^piece/ } @{ $d->{values} };
        $v->{$role}[1] = $dp[ rnd(scalar @dp) ][2];
        push @{ $plan->{ops} }, "$role replaced by a piece of $d->{name}";
    } elsif ($r == 4) {   # the record lists fewer, or more, pieces
        my ($b, $what) = FuzzRecords::mutate_field($v->{record}[1], $RNG);
        $v->{record}[1] = $b;
        push @{ $plan->{ops} }, "record: $what";
    } elsif ($r == 5) {   # a piece's payload opens into another size (a well-formed piece of the wrong length)
        my $p = FuzzRecords::decode_piece($v->{$role}[1]) // return mutate_value($plan, $role);
        my $cut = length($p->{payload}) ? rnd(length $p->{payload}) : 0;
        my $new = substr($v->{$role}[1], 0, 26) . (chance(0.5) ? substr($p->{payload}, 0, $cut) : $p->{payload} . 'x' x (1 + rnd(300)));
        # the size the record lists for it made to match, so that the look passes
        my $list = FuzzRecords::decode_piece_list($v->{record}[1]);
        if ($list && chance(0.7)) {
            my ($n) = $role =~ /(\d+)/;
            substr($v->{record}[1], 37 + 32 + 4 * $n, 4) = pack('N', length $new) if $n < $list->{count};
        }
        $v->{$role}[1] = $new;
        push @{ $plan->{ops} }, "$role payload resized to " . (length($new) - 26) . ' (the record told)';
    } else {
        mutate_value($plan, $role);
    }
}

# A live log rebuilt frame by frame from the seed's: frames dropped,
# doubled, reordered, lengths lying, the end changed, garbage after it; or
# the log in flight, or none.
sub mutate_live {
    my ($plan) = @_;
    my $v = $plan->{values};
    return mutate_value($plan, 'record') unless $v->{live};
    $plan->{identity} = 0;
    my @f = FuzzRecords::live_frames($v->{live}[1]);
    my $r = @f ? rnd(12) : 11;   # no frames to work on: its bytes
    my $what;
    if ($r == 0) { @f = grep { $_->[0] ne 'E' } @f; $what = 'no end frame' }
    elsif ($r == 1) { splice @f, 1 + rnd(scalar @f), 0, $f[0]; $what = 'a second head' }
    elsif ($r == 2 && @f > 2) { my $b = splice @f, 1, 1; unshift @f, $b; $what = 'a body before the head' }
    elsif ($r == 3) { splice @f, 1, 0, [ 'B', '' ]; $what = 'an empty body frame' }
    elsif ($r == 4) { $f[-1] = [ 'E', chr(one_of(0, 1, 2, 3, 4, 0xff)) ]; $what = 'end byte ' . ord($f[-1][1]) }
    elsif ($r == 5) { push @f, [ 'B', 'after the end' ]; $what = 'a body after the end' }
    elsif ($r == 6) { splice @f, 1, 0, [ one_of('X', 'h', "\0", 'e'), 'zz' ]; $what = 'an unknown frame type' }
    elsif ($r == 7) {
        my ($b, $w) = FuzzRecords::mutate_field($f[0][1], $RNG);
        $f[0][1] = $b;
        $what = "head record: $w";
    } elsif ($r == 8) {
        $v->{live}[1] = $plan->{case}{partial_log} // $v->{live}[1];
        push @{ $plan->{ops} }, 'live: the log as it was in flight';
        return;
    } elsif ($r == 9) {
        delete $v->{live};
        push @{ $plan->{ops} }, 'live: no log';
        return;
    } elsif ($r == 10) {   # many small body frames
        my @body = map { [ 'B', 'data: ' . ('x' x rnd(40)) . "\n\n" ] } 1 .. 1 + rnd(200);
        splice @f, 1, 0, @body;
        $what = scalar(@body) . ' more body frames';
    } else {
        my ($b, $w) = FuzzRecords::mutate_bytes(FuzzRecords::live_log(@f), $RNG, \@MATERIAL);
        $v->{live}[1] = $b;
        push @{ $plan->{ops} }, "live: $w";
        return;
    }
    $v->{live}[1] = FuzzRecords::live_log(@f);
    push @{ $plan->{ops} }, "live: $what";
}

sub make_plan {
    my ($c) = @_;
    my $plan = base_plan($c);
    my $rounds = chance(0.06) ? 0 : 1 + rnd(3);
    for (1 .. $rounds) {
        my $r = rnd(100);
        if ($c->{live} && $r < 45) { mutate_live($plan) }
        elsif (grep { /^piece/ } keys %{ $plan->{values} } and $r < 55) { mutate_pieces($plan) }
        elsif ($r < 62 && $CRAFTED{ $c->{name} }) {
            my $k = $CRAFTED{ $c->{name} }[ rnd(scalar @{ $CRAFTED{ $c->{name} } }) ];
            $plan->{values}{record}[1] = $k->[0];
            $plan->{identity} = 0;
            push @{ $plan->{ops} }, "record: $k->[1]";
        } elsif ($r < 68) { transplant($plan) }
        else {
            my @roles = keys %{ $plan->{values} };
            mutate_value($plan, chance(0.7) || !@roles ? 'record' : $roles[ rnd(scalar @roles) ]);
        }
    }
    # A claim whose token changed names its live log after the new token.
    my $rec = $plan->{values}{record};
    if ($rec && $plan->{values}{live} && defined(my $token = FuzzRecords::claim_token($rec->[1]))) {
        $plan->{values}{live}[0] = live_key($c->{skey}, $token);
    }
    $plan->{values}{record} //= [ $c->{skey}, '' ];
    return $plan;
}

# What the plan writes: [key, bytes, ttl] each (a live log short-lived).
sub plan_writes {
    my ($plan) = @_;
    return [ map { [ $plan->{values}{$_}[0], substr($plan->{values}{$_}[1], 0, MAX_VALUE),
                     $_ eq 'live' ? LIVE_TTL_MS : RECORD_TTL_MS ] } sort keys %{ $plan->{values} } ];
}

# What a replay of the plan must be, when the harness can tell: the plain
# record's status and body, or the body the plain pieces hold.
sub plan_oracle {
    my ($plan) = @_;
    my $rec = $plan->{values}{record}[1];
    if (my $r = FuzzRecords::decode_response($rec)) {
        return { status => $r->{status}, body => $r->{body}, why => 'the plain record written' };
    }
    if (my $list = FuzzRecords::decode_piece_list($rec)) {
        my $body = '';
        for my $i (0 .. $list->{count} - 1) {
            my $p = $plan->{values}{"piece$i"} // return undef;
            my $piece = FuzzRecords::decode_piece($p->[1]) // return undef;
            return undef if $piece->{form} != 0;
            $body .= $piece->{payload};
        }
        return { body => $body, why => 'the plain pieces written' };
    }
    return undef;
}

# ------------------------------------------------------------ actions

sub pick_actions {
    my ($plan, $store) = @_;
    my $c = $plan->{case};
    my @extra;
    push @extra, [ 'Last-Event-ID', one_of('3', '1', '999', '', 'x y') ] if $c->{sse} && chance(0.3);
    push @extra, [ 'Range', one_of('bytes=0-10', 'bytes=5-', 'bytes=-3', 'bytes=0-1,4-6') ] if chance(0.08);
    push @extra, [ 'Accept-Encoding', 'gzip' ] if chance(0.08);
    my @groups;   # each a list of requests sent at once
    my $r = rnd(100);
    my $left = 0;
    if ($c->{live}) {
        my @join = (request_for($c, $store, headers => \@extra, join => 1));
        push @join, request_for($c, $store, join => 1) if chance(0.3);
        if (chance(0.25)) { $join[-1]{leave_after} = rnd(400); $join[-1]{rst} = chance(0.5); $left = 1 }
        push @groups, \@join;
    } elsif ($r < 65) {
        push @groups, [ request_for($c, $store, headers => \@extra) ];
    } elsif ($r < 80) {
        push @groups, [ request_for($c, $store, headers => \@extra), request_for($c, $store) ];
    } elsif ($r < 93) {
        push @groups, [ request_for($c, $store, headers => \@extra, leave_after => rnd(600), rst => chance(0.5)) ];
        $left = 1;
    }
    push @groups, [ admin_request($c, $store, 'GET') ] if chance(0.45) || !@groups;
    push @groups, [ admin_request($c, $store, 'DELETE', chance(0.3) ? '?force=1' : '') ] if !$left && chance(0.15);
    return \@groups;
}

# ------------------------------------------------------------ checks

my %STATS = (iterations => 0, requests => 0);
my (%ANSWERS, %FINDINGS, %SIG_SEEN, %SIG_STORES, @FINDING_DIRS);
my $FINDING_SEQ = 0;

sub answer_class {
    my ($a) = @_;
    return 'left' if $a->{left};
    return 'timeout' if $a->{timed_out};
    return 'no-answer' . ($a->{finalized} && $a->{finalized} =~ /(replayed|joined)/ ? " ($1, cut before the head)" : '')
        if !$a->{status};
    return "interim-$a->{status}" if $a->{interim};
    my $replayed = ($a->{headers}{'idempotent-replayed'} // '') eq 'true';
    return ($replayed ? 'replay' : "status") . ($a->{complete} ? '' : '-cut') . ($replayed ? '' : "-$a->{status}");
}

# Whether a plan's record is (or may be, sealed) one kept in pieces: its
# replays may be cut off (docs/design.md#large-responses-in-pieces).
sub plan_has_pieces {
    my ($plan) = @_;
    return 1 if grep { /^piece/ } keys %{ $plan->{values} };
    return 1 if FuzzRecords::decode_piece_list($plan->{values}{record}[1]);
    return $plan->{case}{loc} =~ /pieces$/ ? 1 : 0;
}

# What is wrong with one answer, or undef.
sub judge {
    my ($plan, $req, $a) = @_;
    my $class = answer_class($a);
    return undef if $class eq 'left';
    $class = 'no-answer' if $class =~ /^no-answer/;
    return [ 'no-answer-in-time', "no answer within " . REQUEST_SECS . " s" ] if $class eq 'timeout';
    if ($class eq 'no-answer') {
        # a replay from pieces, or a join, cut off before its header left
        # (the header goes out with the first bytes of the body): the access
        # log has it as answered
        return undef if (plan_has_pieces($plan) || $req->{join}) && !$plan->{identity}
                        && ($a->{finalized} // '') =~ /\b(?:replayed|joined)\b/;
        return [ 'no-answer', 'the connection closed before a status line' . ($a->{error} ? " ($a->{error})" : '') ];
    }
    return [ 'interim-status', "an interim status $a->{status} as the answer" ] if $a->{interim};
    my $ct = $a->{headers}{'content-type'} // '';
    if ($req->{admin}) {
        return [ 'admin-answer', "status $a->{status} from the operator's endpoint" ]
            unless grep { $a->{status} == $_ } 200, 400, 404, 409, 503;
        return [ 'admin-answer', 'cut short' ] unless $a->{complete};
        my $doc = eval { JSON::PP->new->decode($a->{body}) };
        return [ 'admin-answer', "not one JSON object ($ct): " . substr($a->{body}, 0, 200) ] unless ref $doc eq 'HASH';
        return [ 'admin-answer', 'bytes outside printable ASCII' ] if $a->{body} =~ /[^\x20-\x7e\n]/;
        return [ 'admin-leaks-key', 'the raw key in the answer' ] if index($a->{body}, $plan->{case}{key}) >= 0;
        return undef;
    }
    my $replayed = ($a->{headers}{'idempotent-replayed'} // '') eq 'true';
    if (!$replayed) {
        return [ 'unexpected-answer', "status $a->{status} without the replay marker" ]
            unless grep { $a->{status} == $_ } 409, 410, 422, 503;
        return [ 'unexpected-answer', "status $a->{status} not a problem document ($ct)" ]
            unless $ct =~ m{^application/problem\+json};
        return [ 'cut-short', "status $a->{status} cut short" ] unless $a->{complete};
        if ($plan->{identity} && $plan->{case}{expect} && $a->{status} != $plan->{case}{expect}{status}
            && !($plan->{case}{live} && $a->{status} == 409)) {
            return [ 'seed-not-replayed', "the unaltered seed answered $a->{status}, not $plan->{case}{expect}{status}" ];
        }
        return undef;
    }
    # a replay
    my $pieces = plan_has_pieces($plan);
    if (!$a->{complete}) {
        return [ 'seed-not-replayed', 'the unaltered seed replayed cut short after ' . length($a->{body}) . ' body bytes' ]
            if $plan->{identity} && !$req->{join};
        # the design cuts these off (a piece that fails, a log that stops,
        # one altered after its head), also a request the gateway joined to
        # a live log it was not planned for (a claim transplanted with one)
        return undef if $req->{join} || $pieces || ($a->{finalized} // '') =~ /\bjoined\b/;
        return [ 'cut-short', "a replay cut short after " . length($a->{body}) . ' body bytes' ];
    }
    return undef if grep { $_->[0] =~ /^(?:Range|Last-Event-ID|Accept-Encoding)$/ } @{ $req->{headers} };
    if ($plan->{identity} && (my $want = $plan->{case}{expect})) {
        return [ 'seed-not-replayed', "the unaltered seed replayed as $a->{status} with " . length($a->{body})
                 . " bytes, not $want->{status} with " . length($want->{body}) ]
            unless $req->{join} || ($a->{status} == $want->{status} && $a->{body} eq $want->{body});
    }
    # a 204 or 304 has no body by HTTP, whatever the record held (nginx
    # sends none): a crafted one with a body is replayed without it
    if ($a->{status} == 204 || $a->{status} == 304) {
        return length $a->{body} ? [ 'replay-differs', "a $a->{status} replayed with a body" ] : undef;
    }
    if (!$req->{join} && (my $o = plan_oracle($plan))) {
        return [ 'replay-differs', "replayed status $a->{status}, $o->{why} has $o->{status}" ]
            if defined $o->{status} && $a->{status} != $o->{status} && $o->{status} != 204 && $o->{status} != 304;
        return [ 'replay-differs', 'replayed body of ' . length($a->{body}) . " bytes, $o->{why} holds " . length($o->{body}) ]
            if $a->{body} ne $o->{body} && !(defined $o->{status} && ($o->{status} == 204 || $o->{status} == 304));
    }
    return undef;
}

my $ACCESS_POS = 0;
my %FINALIZED;
sub read_access_log {
    open my $fh, '<', $ACCESS_LOG or return;
    seek $fh, $ACCESS_POS, 0;
    while (my $line = <$fh>) {
        last unless $line =~ /\n\z/;
        $ACCESS_POS += length $line;
        my ($id, $status, $outcome) = split ' ', $line;
        $FINALIZED{$id} = [ $status, $outcome // '' ] if defined $id && $id ne '-';
    }
}

my $UP_LOG = "$TMP/upstream.log";
my $UP_POS = 0;
sub new_executions {
    open my $fh, '<', $UP_LOG or return ();
    seek $fh, $UP_POS, 0;
    my @ex;
    while (my $line = <$fh>) {
        last unless $line =~ /\n\z/;
        $UP_POS += length $line;
        push @ex, $line =~ s/\s+\z//r if $line =~ /^execution /;
    }
    return @ex;
}

my (%RSS_BASE, %RSS_REBASE);
my ($RSS_MAX_GROWTH, $RSS_LAST_READ) = (0, 0);
sub rss_status {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return;
    my %s;
    while (my $line = <$fh>) { $s{$1} = $2 if $line =~ /^(VmRSS|RssAnon|RssShmem):\s+(\d+) kB/ }
    return \%s;
}

# The error log's new lines: a worker that died (on a signal, or exiting
# with a code: a sanitizer that aborts), [alert], [crit] and [emerg] lines;
# and the [error]/[warn] messages counted, digits as N.
sub log_check {
    my (@bad, %errors);
    for my $line (Idem::Nginx::new_log_lines($NG)) {
        if (Idem::CrashSentinel::bad_line($line)
            || $line =~ /\[(?:crit|emerg)\]|exited with code [1-9]|core dumped|segfault/) {
            push @bad, $line;
        } elsif ($line =~ /\[(error|warn)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client: .*)?$/) {
            (my $msg = "[$1] $2") =~ s/\d+/N/g;
            $errors{$msg}++;
        }
    }
    return (\@bad, \%errors);
}

my (@WORKERS, $WORKERS_AT);
sub workers {
    if (!$WORKERS_AT || time - $WORKERS_AT > RSS_EVERY) {
        @WORKERS = Idem::Nginx::workers_of($NG->{pid});
        $WORKERS_AT = time;
    }
    return @WORKERS;
}

# Every worker waits in epoll_wait: none is in the middle of a handler.
sub workers_idle {
    for my $w (workers()) {
        open my $fh, '<', "/proc/$w/wchan" or next;   # gone: the log tells
        my $wchan = <$fh> // '';
        return 0 unless $wchan =~ /epoll/;
    }
    return 1;
}

# Sanitizer reports, each whole: [file, text] each. A report still being
# written is waited for (a bounded while), then taken as it is.
my %PENDING;
sub report_whole {
    my ($text) = @_;
    my $at = 0;
    $at = $-[0] while $text =~ /ERROR: \w+Sanitizer|runtime error:/g;
    my $last = substr($text, $at);
    return 0 unless $last =~ /^SUMMARY: \w+Sanitizer/m;
    return 1 unless $last =~ /Shadow bytes around/;
    return $last =~ /Right alloca redzone[^\n]*\n/ ? 1 : 0;
}

sub sanitizer_reports {
    my $collect = sub { $PENDING{ $_->[0] } .= $_->[1] for Idem::Nginx::asan_new_reports(); return 1 };
    $collect->();
    Idem::Wait::wait_until(sub { $collect->() && !grep { !report_whole($_) } values %PENDING }, 10) if %PENDING;
    my @out;
    for my $file (sort keys %PENDING) {
        my $text = delete $PENDING{$file};
        # one report each: ASan's open with a line of '=', UBSan's with "file:line:col: runtime error"
        my @parts = split /(?=^={40,}\n|^[^\n]*: runtime error: )/m, $text;
        push @out, map { [ $file, $_ ] } grep { /\S/ } @parts;
    }
    return @out;
}

# The top frames of a sanitizer report, and its signature.
sub report_frames {
    my ($text) = @_;
    my ($error) = $text =~ /^(?:==\d+==)?(ERROR: \w+Sanitizer: [^\n]*)/m;
    ($error) = $text =~ /(runtime error: [^\n]*)/ unless $error;
    $error //= (split /\n/, $text)[0] // 'report';
    $error =~ s/ on address 0x[0-9a-f]+.*//;
    my @frames;
    while ($text =~ /^\s*#(\d+) 0x[0-9a-f]+ in (.+?)(?: (\S+:\d+(?::\d+)?))?$/mg) {
        last if $1 == 0 && @frames;   # the next stack (the allocation's, the free's)
        push @frames, "$2" . ($3 ? " $3" : '');
        last if @frames >= 8;
    }
    my @module = grep { m{/module/} } @frames;
    my @names = map { my $f = $_; $f =~ s/\(.*//; $f =~ s/ \S+$//; $f } (@module ? @module : @frames)[0 .. 2];
    (my $sig_error = $error) =~ s/\d+//g;
    return ($error, \@frames, join(' < ', grep { defined } @names) . " | $sig_error");
}

# ------------------------------------------------------------ findings

my $LAST_INPUT;   # the previous iteration's input, kept with a finding

sub input_of {
    my ($store, $plan, $groups, $answers) = @_;
    return { store => $store, case => $plan->{case}{name}, ops => $plan->{ops}, identity => $plan->{identity},
             writes => plan_writes($plan), deletes => $plan->{deletes} // [],
             groups => [ map { [ map { my %r = %$_; delete $r{port}; \%r } @$_ ] } @$groups ],
             answers => $answers };
}

sub save_input {
    my ($dir, $in) = @_;
    make_path($dir);
    my @writes;
    my $i = 0;
    for my $w (@{ $in->{writes} }) {
        my $file = sprintf('value%02d.bin', $i++);
        write_file("$dir/$file", $w->[1]);
        push @writes, { key => $w->[0], file => $file, ttl_ms => $w->[2], size => length $w->[1],
                        kind => FuzzRecords::kind_of($w->[1]) };
    }
    my %m = (store => $in->{store}, case => $in->{case}, ops => $in->{ops}, writes => \@writes,
             deletes => $in->{deletes}, requests => $in->{groups});
    write_file("$dir/input.json", JSON::PP->new->canonical->pretty->encode(\%m));
    my $text = '';
    for my $a (@{ $in->{answers} // [] }) {
        $text .= "--- $a->{id}: " . answer_class($a) . " after " . sprintf('%.3f', $a->{elapsed}) . " s"
               . (defined $a->{finalized} ? " (access log: $a->{finalized})" : '') . "\n";
        $text .= ($a->{head} // '') . "\n\n";
        $text .= substr($a->{body} // '', 0, 2000) . "\n" if defined $a->{body};
    }
    write_file("$dir/answers.txt", $text);
}

sub finding {
    my ($kind, $sig, $detail, $input) = @_;
    $FINDINGS{$kind}++;
    my $key = "$kind | $sig";
    my $n = ++$SIG_SEEN{$key};
    $SIG_STORES{$key}{ $input->{store} // '?' }++;
    my $dir;
    if ($n <= KEEP_PER_SIG) {
        $dir = sprintf('%s/%03d-%s', $opt{findings}, ++$FINDING_SEQ, $kind);
        save_input($dir, $input);
        save_input("$dir/previous", $LAST_INPUT) if $LAST_INPUT;
        write_file("$dir/finding.txt", "kind: $kind\nsignature: $sig\n\n$detail\n");
        push @FINDING_DIRS, [ $key, $dir ];
    }
    if ($n == 1) {
        print "  FINDING $kind: $sig" . ($dir ? " ($dir)" : '') . "\n";
        my @lines = grep { /\S/ } split /\n/, $detail;
        print map { "    $_\n" } @lines[0 .. ($#lines < 11 ? $#lines : 11)];
    }
}

# ------------------------------------------------------------ one iteration

my %LAST_KEYS = (redis => {}, zone => {});

sub run_groups {
    my ($groups) = @_;
    my @answers;
    for my $g (@$groups) {
        my @a = exchange($g);
        $a[$_]{req} = $g->[$_] for 0 .. $#a;
        push @answers, @a;
        $STATS{requests} += @$g;
    }
    return @answers;
}

sub settle_and_check {
    my ($store, $input, $answers) = @_;
    my %asked = map { $_->{id} => $_ } @$answers;
    Idem::Wait::wait_until(sub { read_access_log(); !grep { !$FINALIZED{$_} } keys %asked }, FINALIZE_SECS);
    for my $a (@$answers) {
        $a->{finalized} = $FINALIZED{ $a->{id} } ? join(' ', @{ $FINALIZED{ $a->{id} } }) : undef;
    }
    my @found;
    for my $id (grep { !$FINALIZED{$_} } sort keys %asked) {
        push @found, [ 'not-finalized', "request $id not in the access log after " . FINALIZE_SECS . ' s', '' ];
    }
    delete @FINALIZED{ keys %asked };
    # a report is written by the worker in the handler that went wrong,
    # which may outlast the request's log line: the workers back in their
    # event loop, every report is whole
    Idem::Wait::wait_until(\&workers_idle, 5);
    for my $rep (sanitizer_reports()) {
        my ($error, $frames, $sig) = report_frames($rep->[1]);
        push @found, [ 'sanitizer', $sig, "$error\n" . join("\n", @$frames) . "\n\nreport ($rep->[0]):\n" . substr($rep->[1], 0, 20000) ];
        # A worker that reported has the symbolizer's tables (the module's
        # debug information, some 35 MB) on top of what it held: its RSS
        # is measured from there on.
        if (my ($pid) = $rep->[0] =~ /\.(\d+)$/) { $RSS_REBASE{$pid} = 1 }
    }
    for my $pid (keys %RSS_REBASE) {
        my $st = rss_status($pid) or next;
        $RSS_BASE{$pid} = $st->{VmRSS} if delete $RSS_REBASE{$pid};
    }
    my ($bad, $errors) = log_check();
    for my $line (@$bad) {
        (my $sig = $line) =~ s/^\S+ \S+ //;
        $sig =~ s/\d+/N/g;
        $sig =~ s/, client: .*//;
        push @found, [ $line =~ /exited on signal|exited with code|core dumped|segfault/ ? 'worker-died' : 'alert', $sig, $line ];
    }
    for my $msg (keys %$errors) {
        (my $m = $msg) =~ s/"[^"]*idem:[^"]*"/"<key>"/g;
        $STATS{log_errors}{$m} += $errors->{$msg};
    }
    for my $ex (new_executions()) {
        (my $path = $ex) =~ s/^execution \d+ \S+ (\S+?)(?:\?\S*)? .*/$1/;
        push @found, [ 'executed', "the upstream ran $path", "$ex\n(every key fuzzed holds a record: nothing may run again)" ];
    }
    if (time - $RSS_LAST_READ >= RSS_EVERY) {
        $RSS_LAST_READ = time;
        for my $w (workers()) {
            my $s = rss_status($w) // next;
            $RSS_BASE{$w} //= $s->{VmRSS};
            my $growth = $s->{VmRSS} - $RSS_BASE{$w};
            $RSS_MAX_GROWTH = $growth if $growth > $RSS_MAX_GROWTH;
            if ($growth > $opt{'rss-mb'} * 1024 && !$RSS_BASE{"over$w"}++) {
                push @found, [ 'rss', "a worker's VmRSS over its baseline by more than $opt{'rss-mb'} MB",
                               "worker $w: VmRSS $s->{VmRSS} kB (RssAnon $s->{RssAnon}, RssShmem $s->{RssShmem}), "
                             . "baseline $RSS_BASE{$w} kB" ];
            }
        }
    }
    return @found;
}

sub iteration {
    my ($store) = @_;
    my ($c, $plan);
    for my $try (1 .. 20) {   # --skip-ops: a plan that does what is skipped is drawn again
        $c = $CASES[ rnd(scalar @CASES) ];
        $plan = eval { make_plan($c) };
        if (!$plan) {   # the harness's own fault: told, counted, and another drawn
            print "  harness error making a plan for $c->{name}: $@" unless $STATS{harness_errors}++;
            next;
        }
        last unless $opt{'skip-ops'} && grep { /$opt{'skip-ops'}/ } @{ $plan->{ops} };
    }
    $plan //= base_plan($c);
    my $writes = plan_writes($plan);
    my %now = map { $_->[0] => 1 } @$writes;
    $plan->{deletes} = [ grep { !$now{$_} } sort keys %{ $LAST_KEYS{$store} } ];
    store_write($store, $writes, $plan->{deletes});
    $LAST_KEYS{$store} = \%now;
    my $groups = pick_actions($plan, $store);
    my @answers = run_groups($groups);
    my $input = input_of($store, $plan, $groups, \@answers);
    my @found = settle_and_check($store, $input, \@answers);
    for my $a (@answers) {
        $ANSWERS{ ($a->{req}{admin} ? 'admin ' . $a->{req}{method} . ' ' : '') . answer_class($a) }++;
        my $bad = judge($plan, $a->{req}, $a) or next;
        push @found, [ $bad->[0], $bad->[1] =~ s/\d+/N/gr,
                       "$bad->[1]\ncase $c->{name} on the $store store; request $a->{id} ($a->{req}{method} $a->{req}{path})\n"
                     . "ops: " . join('; ', @{ $plan->{ops} }) . "\n\n" . ($a->{head} // '') ];
    }
    for my $f (@found) {
        my ($kind, $sig, $detail) = @$f;
        finding($kind, $sig, "$detail\n\ncase $c->{name} on the $store store; ops: " . join('; ', @{ $plan->{ops} }), $input);
    }
    $LAST_INPUT = $input;
    $STATS{iterations}++;
    $STATS{by_store}{$store}++;
    if ($groups->[-1][0]{admin} && $groups->[-1][0]{method} eq 'DELETE') {
        delete $LAST_KEYS{$store}{ $c->{skey} } if grep { $_->{req}{method} eq 'DELETE' && $_->{status} == 200 } @answers;
    }
}

# ------------------------------------------------------------ the fixed scenario

# Before the fuzzing, on each store, the scenario every store must hold:
# a response kept in pieces that lost one (one in the middle, then the
# last: what eviction or a flushed replica leaves), retried four times over
# one keep-alive connection as a client's pool does, so that a request the
# module ended is freed at once: every retry 410, every worker alive, no
# sanitizer report.
sub lost_piece_scenario {
    my ($store) = @_;
    my ($c) = grep { $_->{name} eq 'pieces-noise' } @CASES or die "fuzz-gateway: no pieces seed\n";
    my @pieces = grep { $_->[0] =~ /^piece\d+$/ } @{ $c->{values} };
    for my $lost ($pieces[1], $pieces[-1]) {
        my @writes = map { [ $_->[1], $_->[2], RECORD_TTL_MS ] } grep { $_ != $lost } @{ $c->{values} };
        store_write($store, \@writes, [ $lost->[1] ]);
        my @workers = sort { $a <=> $b } Idem::Nginx::workers_of($NG->{pid});
        my @reqs = map { request_for($c, $store) } 1 .. 4;
        my @answers;
        my $pool = Idem::HTTP::pool_new(concurrency => 1,
                                        on_done => sub { my ($req, $res) = @_; push @answers, { %$res, id => $req->{id}, req => $req } });
        Idem::HTTP::pool_submit($pool, $_) for @reqs;
        Idem::HTTP::pool_run($pool, time + REQUEST_SECS);
        $STATS{requests} += @reqs;
        my $input = { store => $store, case => $c->{name}, ops => ["$lost->[0] lost, 4 retries on one connection"],
                      writes => \@writes, deletes => [ $lost->[1] ], groups => [ [ @reqs ] ], answers => \@answers };
        my @found = settle_and_check($store, $input, \@answers);
        my @got = map { ($_->{status} // 0) || ($_->{error} // 'no answer') } @answers;
        push @found, [ 'scenario', 'a retry of a response that lost a piece was not answered 410',
                       "$lost->[0] lost: the retries got @got" ] if @answers != 4 || grep { $_ ne '410' } @got;
        my @now = sort { $a <=> $b } Idem::Nginx::workers_of($NG->{pid});
        push @found, [ 'scenario', 'a worker died answering the retries of a response that lost a piece',
                       "workers before: @workers; after: @now" ] if "@now" ne "@workers";
        finding($_->[0], $_->[1], "$_->[2]\n\ncase $c->{name} on the $store store", $input) for @found;
        printf "fuzz-gateway: on the %s store, %s lost: four retries on one connection got %s%s\n", $store, $lost->[0],
            join(' ', @got), @found ? '' : ', every worker alive';
    }
}

# ------------------------------------------------------------ replay

sub replay_finding {
    my ($dir) = @_;
    my $m = JSON::PP->new->decode(read_file("$dir/input.json") // die "fuzz-gateway: no $dir/input.json\n");
    my $store = $m->{store};
    my @writes = map { [ $_->{key}, read_file("$dir/$_->{file}"), $_->{ttl_ms} ] } @{ $m->{writes} };
    print "fuzz-gateway: replaying $dir ($opt{repeat} times): case $m->{case} on the $store store; ops: "
        . join('; ', @{ $m->{ops} }) . "\n";
    my $failed = 0;
    for my $round (1 .. $opt{repeat}) {
        # the writes again each round: a purge, or the module, may have changed them
        store_write($store, \@writes, []);
        my @groups = map { [ map { { %$_, port => $PORT{$store}, id => sprintf('r%d', ++$REQ_SEQ) } } @$_ ] } @{ $m->{requests} };
        for my $g (@groups) {
            for my $r (@$g) { $_->[1] = $r->{id} for grep { $_->[0] eq 'X-Fuzz-Id' } @{ $r->{headers} } }
        }
        my @answers = run_groups(\@groups);
        my @found = settle_and_check($store, {}, \@answers);
        print "round $round:\n";
        for my $a (@answers) {
            print "--- $a->{id} $a->{req}{method} $a->{req}{path}: " . answer_class($a)
                . ' (access log: ' . ($a->{finalized} // 'none') . ")\n" . ($a->{head} // '') . "\n";
        }
        for my $f (@found) { print "FINDING $f->[0]: $f->[1]\n$f->[2]\n" }
        $failed ||= @found ? 1 : 0;
    }
    return $failed;
}

# ------------------------------------------------------------ main

if ($opt{replay}) {
    exit replay_finding($opt{replay});
}

# This run's findings replace the last run's (only entries named as
# findings are), unless it only writes seeds.
if ($opt{seconds} > 0 && opendir my $dh, $opt{findings}) {
    remove_tree("$opt{findings}/$_") for grep { /^\d{3}-[a-z-]+$/ } readdir $dh;
    closedir $dh;
}

my $t_seed = time;
print "fuzz-gateway: seeding from real requests (Redis)\n";
@CASES = seed_all();
@MATERIAL = ((map { map { $_->[2] } @{ $_->{values} } } @CASES), (grep { defined } map { $_->{partial_log} } @CASES),
             committed_material());
write_seeds($opt{'write-seeds'}) if $opt{'write-seeds'};
craft_compressed();
my @stores = $opt{store} eq 'both' ? qw(redis zone) : ($opt{store});
check_seeds($_) for @stores;
new_executions();   # the seeding's executions: the fuzzing must add none
# The harness checks itself: a new key runs the upstream once, and the
# upstream's log tells it.
{
    my $probe = new_case(name => 'self-check', loc => 'plain', path => '/plain/self-check');
    my ($a) = exchange([ request_for($probe, $stores[0]) ]);
    my @ex;
    Idem::Wait::wait_until(sub { push @ex, new_executions(); scalar @ex }, 10);
    die "fuzz-gateway: self-check: a new key answered $a->{status} and ran the upstream "
        . scalar(@ex) . " times, not once\n" unless $a->{status} == 201 && @ex == 1 && $ex[0] =~ m{ /plain/self-check };
}
read_access_log();
%FINALIZED = ();
log_check();
for my $rep (sanitizer_reports()) {
    my ($error, $frames, $sig) = report_frames($rep->[1]);
    finding('sanitizer', "$sig (while seeding)", "$error\n" . join("\n", @$frames), { store => 'redis', ops => ['seeding'], writes => [] });
}
printf "fuzz-gateway: %d seed cases, %d values of splice material, seeded in %.1f s\n",
    scalar @CASES, scalar @MATERIAL, time - $t_seed;
lost_piece_scenario($_) for @stores;
for my $w (Idem::Nginx::workers_of($NG->{pid})) {
    my $s = rss_status($w) // next;
    $RSS_BASE{$w} = $s->{VmRSS};
    print "fuzz-gateway: worker $w baseline VmRSS $s->{VmRSS} kB (RssAnon $s->{RssAnon}, RssShmem $s->{RssShmem})\n";
}

my $t0 = time;
my $slice = $opt{seconds} / @stores;
for my $si (0 .. $#stores) {
    my $store = $stores[$si];
    my $end = $t0 + $slice * ($si + 1);
    my $start = time;
    my $cap = int($slice * MAX_RATE) + 1;
    my $next_progress = time + PROGRESS_SECS;
    last if $slice <= 0;
    print "fuzz-gateway: fuzzing the $store store for " . sprintf('%.0f', $end - $start) . " s\n";
    for (my $n = 0; $n < $cap && time < $end; $n++) {
        iteration($store);
        if (time >= $next_progress) {
            $next_progress = time + PROGRESS_SECS;
            my $secs = time - $start;
            my $rss = join ' ', map { my $st = rss_status($_); $st && $RSS_BASE{$_} ? sprintf('%+.1f', ($st->{VmRSS} - $RSS_BASE{$_}) / 1024) : '?' } workers();
            printf "  [%s %4.0f s] %d iterations (%.1f/s), %d requests; findings: %s; workers' VmRSS now %s MB, largest growth %.1f MB\n",
                $store, $secs, $STATS{by_store}{$store} // 0, ($STATS{by_store}{$store} // 0) / ($secs || 1),
                $STATS{requests}, (join(', ', map { "$_ $FINDINGS{$_}" } sort keys %FINDINGS) || 'none'), $rss,
                $RSS_MAX_GROWTH / 1024;
        }
    }
}
my $minutes = (time - $t0) / 60;

# The upstream's own counts (Idem::Upstream): each case's path ran once,
# when it was seeded, whatever the fuzzing did with its key.
{
    my %path = map { ($_->{path} =~ s/\?.*//r) => 1 } @CASES;
    my $counts = Idem::Upstream::upstream_counts(sort keys %path);
    for my $p (sort keys %$counts) {
        next if $counts->{$p} == 1;
        finding('executed', "the upstream ran $p $counts->{$p} times",
                "the upstream's count for $p is $counts->{$p}: once when seeded, never again", $LAST_INPUT // {});
    }
    printf "fuzz-gateway: the upstream's counts: %d paths, each run once\n", scalar keys %$counts
        unless grep { $_ != 1 } values %$counts;
}

# The workers stop: what they report on the way out counts too, and what
# the crash sentinel finds in the whole log then.
Idem::Nginx::nginx_stop($NG);
finding('sentinel', $_ =~ s/^\S+ \S+ //r =~ s/\d+/N/gr, $_, $LAST_INPUT // {}) for @{ $NG->{crashes} || [] };
for my $rep (sanitizer_reports()) {
    my ($error, $frames, $sig) = report_frames($rep->[1]);
    finding('sanitizer', "$sig (at exit)", "$error\n" . join("\n", @$frames), $LAST_INPUT // {});
}

print "\nfuzz-gateway summary (seed $opt{seed})\n";
printf "  %d iterations (%s), %d requests, %.1f minutes fuzzing\n", $STATS{iterations},
    join(', ', map { "$_ " . ($STATS{by_store}{$_} // 0) } @stores), $STATS{requests}, $minutes;
print "  answers:\n";
printf "    %-34s %d\n", $_, $ANSWERS{$_} for sort { $ANSWERS{$b} <=> $ANSWERS{$a} } keys %ANSWERS;
printf "  worker VmRSS growth, largest: %.1f MB (bound %d MB)\n", $RSS_MAX_GROWTH / 1024, $opt{'rss-mb'};
print "  harness errors (plans not made): $STATS{harness_errors}\n" if $STATS{harness_errors};
if (my $e = $STATS{log_errors}) {
    print "  error log, most frequent:\n";
    my @top = (sort { $e->{$b} <=> $e->{$a} } keys %$e)[0 .. 9];
    printf "    %6d %s\n", $e->{$_}, substr($_, 0, 150) for grep { defined } @top;
}
if (%FINDINGS) {
    print "  FINDINGS by kind: " . join(', ', map { "$_ $FINDINGS{$_}" } sort keys %FINDINGS) . "\n";
    for my $sig (sort keys %SIG_SEEN) {
        printf "    %5d x %s (%s)\n", $SIG_SEEN{$sig}, $sig,
            join(', ', map { "$_ $SIG_STORES{$sig}{$_}" } sort keys %{ $SIG_STORES{$sig} });
        print "            $_->[1]\n" for grep { $_->[0] eq $sig } @FINDING_DIRS;
    }
    print "  replay one: $0 --replay DIR\n";
    exit 1;
}
print "  no findings\n";
if ($STATS{harness_errors}) {
    print "  but the harness failed to make $STATS{harness_errors} plans (the first error above)\n";
    exit 2;
}
exit 0;
