#!/usr/bin/env perl
# bench-pieces.pl — what a large response kept in pieces
# (docs/design.md#large-responses-in-pieces) costs: for bodies of 1, 8, 20
# and 64 MB (incompressible: the worst case), the time of the original
# and of a replay through the gateway, the worker's peak resident memory
# (VmHWM) after each, and Redis's memory for the response; then the 64 MB
# original again through a gateway whose Redis is throttled to 10 MB/s (a
# proxy in front of it, t/lib/Idem/FaultProxy.pm): its time and what it
# adds to that worker's peak memory, after a first large response warmed
# up what a capture keeps for good. Prints the tables
# (docs/performance.md#large-responses).
#
#   scripts/bench-pieces.pl [--out FILE]
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
# redis-server (--save '' --appendonly no) and a gateway (nginx with the
# module, 1 worker, idempotency_max_response_size 64m, idempotency_piece_size
# 1m) proxying to a second server
# of the same nginx that serves the bodies as static files. The worker's
# VmHWM is the most it ever held: read after the originals of every size,
# then after the replays, it shows whether a replay holds the response or
# one piece. Bounded: one original and three replays per size.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib";
use lib $FindBin::Bin;

use Getopt::Long qw(GetOptions);
use IO::Socket::INET;
use Time::HiRes qw(time);

use Bodies ();
use Idem::FaultProxy ();
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();
use Idem::Wait ();

my $out;
GetOptions('out=s' => \$out) or die "usage: $0 [--out FILE]\n";

use constant { MB => 1024 * 1024, REPLAYS => 3, PIECE_BODY => 1024 * 1024 - 128, THROTTLE => 10 * 1024 * 1024 };
my @SIZES = (2, 8, 20, 64);

my $dir = Idem::Proc::init(prefix => 'idempotency-bench-pieces');
Idem::Redis::start_redis();
my $redis_port = Idem::Redis::redis_port();

mkdir "$dir/static" or die "$dir/static: $!\n";
for my $mb (@SIZES) {
    my ($body) = Bodies::body('noise', $mb * MB);
    open my $fh, '>', "$dir/static/$mb" or die "$dir/static/$mb: $!\n";
    print {$fh} $body;
    close $fh;
}
chmod 0755, "$dir/static";
chmod 0644, glob "$dir/static/*";

# A gateway of one worker whose Redis is at $port.
sub gateway {
    my ($name, $port) = @_;
    return Idem::Nginx::nginx_start($name, workers => 1, ports => 1,
        http => sub { "access_log off;\ndefault_type application/octet-stream;\n"
              . "upstream backend { server 127.0.0.1:$_[0]{ports}[0]; keepalive 8; }\n"
              . "server { listen 127.0.0.1:$_[0]{ports}[0]; location /static/ { root $dir; } }\n"
              . "idempotency_redis 127.0.0.1:$port;\n" },
        server => join "\n", 'server_name localhost;', 'proxy_http_version 1.1;', 'proxy_set_header Connection "";',
            'location /p/ { idempotency on; idempotency_scope ""; idempotency_max_response_size 64m;',
            '    idempotency_piece_size 1m; proxy_method GET;',
            '    proxy_pass http://backend/static/; }');
}
my $gw = gateway('pieces', $redis_port);
my ($worker) = Idem::Nginx::workers_of($gw->{pid});

# One POST; the body's length and the seconds it took.
sub post {
    my ($path, $key, $to) = @_;
    my $t0 = time;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => ($to // $gw)->{port}, Timeout => 60)
        or die "connect: $!\n";
    print {$s} "POST $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
             . "Content-Length: 1\r\n\r\nx";
    my ($buf, $len) = ('', 0);
    while (my $n = sysread($s, $buf, 1 << 20)) {
        $len += $n;
    }
    close $s;
    return ($len, time - $t0);
}

sub hwm_kb {
    my ($pid) = @_;
    $pid //= $worker;
    open my $fh, '<', "/proc/$pid/status" or die "worker $pid: $!\n";
    while (<$fh>) { return $1 if /^VmHWM:\s+(\d+)/ }
    return 0;
}
sub used_memory { Idem::Redis::redis_command('INFO', 'memory') =~ /^used_memory:(\d+)/m ? $1 : 0 }

my (@rows, %new, %replay);
my $hwm0 = hwm_kb();
for my $mb (@SIZES) {
    my $before = used_memory();
    my $keys = Idem::Redis::redis_command('DBSIZE');
    my ($len, $secs) = post("/p/$mb", "pieces-$mb");
    die "$mb MB: $len bytes\n" unless $len > $mb * MB;
    # Redis takes the pieces, then the record, in order: all there once the
    # record and every piece are
    my $expected = $keys + 1 + int(($mb * MB + PIECE_BODY - 1) / PIECE_BODY);
    Idem::Wait::wait_until(sub { Idem::Redis::redis_command('DBSIZE') >= $expected }, 30)
        or die "$mb MB: not stored within 30 s\n";
    $new{$mb} = [$secs, used_memory() - $before, hwm_kb()];
}
my $hwm_new = hwm_kb();
for my $mb (@SIZES) {
    my @t;
    for (1 .. REPLAYS) {
        my ($len, $secs) = post("/p/$mb", "pieces-$mb");
        die "$mb MB replay: $len bytes\n" unless $len > $mb * MB;
        push @t, $secs;
    }
    @t = sort { $a <=> $b } @t;
    $replay{$mb} = $t[int(@t / 2)];
}
my $hwm_replay = hwm_kb();
Idem::Nginx::nginx_stop($gw);

# Redis throttled: the 64 MB original through a gateway of its own, after
# a first 8 MB one warmed it up.
my $px = Idem::FaultProxy::fault_proxy_start($redis_port);
my $slow = gateway('pieces-throttled', $px->{port});
my ($slow_worker) = Idem::Nginx::workers_of($slow->{pid});
my ($warm_len) = post('/p/8', 'throttled-8', $slow);
die "throttled warm-up: $warm_len bytes\n" unless $warm_len > 8 * MB;
Idem::FaultProxy::fault_proxy_rate($px, THROTTLE);
my $throttled_before = hwm_kb($slow_worker);
my ($slow_len, $slow_secs) = post("/p/$SIZES[-1]", "throttled-$SIZES[-1]", $slow);
die "throttled $SIZES[-1] MB: $slow_len bytes\n" unless $slow_len > $SIZES[-1] * MB;
my $throttled_after = hwm_kb($slow_worker);
Idem::FaultProxy::fault_proxy_rate($px, 0);
my ($replay_len) = post("/p/$SIZES[-1]", "throttled-$SIZES[-1]", $slow);
die "throttled $SIZES[-1] MB replay: $replay_len bytes\n" unless $replay_len > $SIZES[-1] * MB;
Idem::Nginx::nginx_stop($slow);

my $report = "One worker, `idempotency_max_response_size 64m` and `idempotency_piece_size 1m`, incompressible bodies; Redis 7.0 on loopback.\n\n";
$report .= "| body | original, s | worker VmHWM after it, MB | replay (median of " . REPLAYS . "), s | replay MB/s | Redis bytes held | ÷ body |\n";
$report .= "|---:|---:|---:|---:|---:|---:|---:|\n";
for my $mb (@SIZES) {
    my ($secs, $mem, $hwm) = @{ $new{$mb} };
    $report .= sprintf "| %d MB | %.3f | %.1f | %.3f | %.0f | %d | %.3f |\n", $mb, $secs, $hwm / 1024, $replay{$mb},
        $mb / $replay{$mb}, $mem, $mem / ($mb * MB);
}
$report .= sprintf "\nWorker peak resident memory (VmHWM): %.1f MB at start, %.1f MB after the originals, %.1f MB "
                 . "after the replays (the largest response: %d MB).\n", $hwm0 / 1024, $hwm_new / 1024,
                 $hwm_replay / 1024, $SIZES[-1];
$report .= sprintf "\nRedis throttled to %d MB/s (a proxy in front of it): the %d MB original took %.1f s (%.1f MB/s), "
                 . "and the worker's peak resident memory went from %.1f MB to %.1f MB (+%.1f MB) — the capture "
                 . "holds one piece at the store and the one it fills; the replay afterwards was whole.\n",
                 THROTTLE / MB, $SIZES[-1], $slow_secs, $SIZES[-1] / $slow_secs, $throttled_before / 1024,
                 $throttled_after / 1024, ($throttled_after - $throttled_before) / 1024;
if ($out) {
    open my $fh, '>', $out or die "$out: $!\n";
    print {$fh} $report;
    close $fh;
}
print $report;
