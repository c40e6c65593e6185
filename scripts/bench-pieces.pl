#!/usr/bin/env perl
# bench-pieces.pl — what a large response kept in pieces
# (docs/design.md#large-responses-in-pieces) costs: for bodies of 1, 8, 20
# and 64 MB (incompressible: the worst case), the time of the original
# and of a replay through the gateway, the worker's peak resident memory
# (VmHWM) after each, and Redis's memory for the response. Prints a table
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
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();
use Idem::Wait ();

my $out;
GetOptions('out=s' => \$out) or die "usage: $0 [--out FILE]\n";

use constant { MB => 1024 * 1024, REPLAYS => 3, PIECE_BODY => 1024 * 1024 - 128 };
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

my $gw = Idem::Nginx::nginx_start('pieces', workers => 1, ports => 1,
    http => sub { "access_log off;\ndefault_type application/octet-stream;\n"
          . "upstream backend { server 127.0.0.1:$_[0]{ports}[0]; keepalive 8; }\n"
          . "server { listen 127.0.0.1:$_[0]{ports}[0]; location /static/ { root $dir; } }\n"
          . "idempotency_redis 127.0.0.1:$redis_port;\n" },
    server => join "\n", 'server_name localhost;', 'proxy_http_version 1.1;', 'proxy_set_header Connection "";',
        'location /p/ { idempotency on; idempotency_scope ""; idempotency_max_response_size 64m;',
        '    idempotency_piece_size 1m; proxy_method GET;',
        '    proxy_pass http://backend/static/; }');
my ($worker) = Idem::Nginx::workers_of($gw->{pid});

# One POST; the body's length and the seconds it took.
sub post {
    my ($path, $key) = @_;
    my $t0 = time;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}, Timeout => 60)
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
    open my $fh, '<', "/proc/$worker/status" or die "worker $worker: $!\n";
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
if ($out) {
    open my $fh, '>', $out or die "$out: $!\n";
    print {$fh} $report;
    close $fh;
}
print $report;
