#!/usr/bin/env perl
# bench-stall.pl — what a Redis stall of about one idempotency_redis_timeout
# costs a thousand duplicates of one event stream, on a loaded machine
# (docs/design.md#never-blocking): each joins the stream (idempotency_wait)
# and follows it in its worker or through the live log in Redis, while
# Redis stalls (CLIENT PAUSE) for 1.5 timeouts mid-stream. Counted: the
# answers (201 joined, waited, replayed; 503), the 503s of requests the
# stall could not have made miss their own deadline (sent when what was
# left of it was shorter than a timeout), the connections the workers
# opened to Redis again. scripts/bench-stall.sh runs it (and puts its table
# into docs/performance.md).
#
#   scripts/bench-stall.pl [--quick] [--rounds N] [--old MODULE.so] [--out FILE] [--keep]
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
#   redis-server   --save '' --appendonly no
#   upstream       scripts/upstream.pl: the event stream (sse=40&gap=0.1: 4 s)
#   gw             nginx with the module under test (STRESS_MODULE, default
#                  build/ngx_http_idempotency_module.so), 2 workers,
#                  idempotency_wait 10s, idempotency_redis_timeout 1s,
#                  proxy_buffering off
#   gwOld          with --old, the same with that module, its rounds
#                  interleaved with the others
#   2 busy loops   the machine loaded (one per core), for the rounds only
# A round: the original, then 1020 duplicates (240 with --quick) sent over
# 2.4 s (one sixtieth every 40 ms) from 0.5 s into the stream; the stall
# begins when a quarter of them are sent. Every loop is bounded in count
# and time.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib";

use Getopt::Long qw(GetOptions);
use POSIX qw(_exit);
use Time::HiRes qw(time);

use Idem::HTTP ();
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();
use Idem::Upstream ();
use Idem::Wait ();

$| = 1;
my ($quick, $rounds, $old, $out, $keep) = (0, undef, undef, undef, 0);
GetOptions('quick' => \$quick, 'rounds=i' => \$rounds, 'old=s' => \$old, 'out=s' => \$out, 'keep' => \$keep)
    or die "usage: bench-stall.pl [--quick] [--rounds N] [--old MODULE.so] [--out FILE] [--keep]\n";
$rounds //= $quick ? 1 : 3;
die "bench-stall.pl: --rounds must be 1 to 20\n" unless $rounds >= 1 && $rounds <= 20;
die "bench-stall.pl: --old $old: no such file\n" if defined $old && !-f $old;

use constant { TIMEOUT_MS => 1000, STALL_MS => 1500, TICKS => 60, EVERY => 0.04, ROUND_LIMIT => 60 };
my $DUPLICATES = $quick ? 240 : 1020;
my $BATCH = $DUPLICATES / TICKS;   # over 2.4 s: the stall from 0.6 s to 2.1 s

Idem::Proc::init(prefix => 'idempotency-bench-stall');
Idem::Proc::keep(1) if $keep;
Idem::Redis::start_redis();
Idem::Upstream::start_upstream();
my $redis = Idem::Redis::redis_port();

sub gateway {
    my ($name, $module) = @_;
    local $ENV{STRESS_MODULE} = $module if defined $module;
    return Idem::Nginx::nginx_start($name, workers => 2,
        http => "upstream app { server 127.0.0.1:" . Idem::Upstream::upstream_port() . "; }\n"
              . "idempotency_redis 127.0.0.1:$redis;\nidempotency_scope \"\";\naccess_log off;\n",
        server => "add_header X-Idempotency-Status \$idempotency_status always;\n"
                . "location / { idempotency on; idempotency_wait 10s; idempotency_redis_timeout "
                . TIMEOUT_MS . "ms; proxy_buffering off; proxy_pass http://app; }\n");
}

my @gws = ([ 'this build', gateway('gw') ]);
push @gws, [ 'before', gateway('gwold', $old) ] if defined $old;

# The ids of the clients of Redis now, but for this script's own connection.
sub clients {
    my $list = Idem::Redis::redis_command('CLIENT', 'LIST');
    return map { /\bid=(\d+)/ ? ($1 => 1) : () } grep { !/cmd=client\|list/ } split /\n/, $list;
}

# The machine loaded: a busy loop per core, stopped by pid after the rounds.
my @busy;
for (1 .. 2) {
    my $pid = fork // die "bench-stall.pl: fork: $!\n";
    if ($pid == 0) { my $until = time + 30 * 60; 1 while time < $until; _exit(0) }
    Idem::Proc::track($pid);
    push @busy, $pid;
}

my $key_seq = 0;
sub round {
    my ($gw) = @_;
    my $key = 'st-' . ++$key_seq;
    my $path = "/s/$key?sse=40&gap=0.1";
    my (%answers, @late, $stalled_at, $p);
    my ($sent, $next, $original_in, $late_sent) = (0, 0, 0, 0);
    my $t0 = time;
    my %before = clients();
    my $req = sub {
        return { port => $gw->{port}, method => 'POST', path => $path, body => 'x', timeout => 30, sent => time,
                 headers => [['Idempotency-Key', $key]] };
    };
    $p = Idem::HTTP::pool_new(
        concurrency => $DUPLICATES + 1,
        on_done => sub {
            my ($r, $res) = @_;
            my $label = ($res->{status} // 0) . ' ' . ($res->{headers}{'x-idempotency-status'} // $res->{error} // '-');
            $answers{$label}++;
            push @late, $r if $label =~ /^503/ && $stalled_at && $r->{sent} > $stalled_at + (STALL_MS - 0.6 * TIMEOUT_MS) / 1000;
        },
        on_tick => sub {
            my $now = time;
            return 0 if $sent >= $DUPLICATES || $now - $t0 > ROUND_LIMIT;
            return 1 if $now < $t0 + 0.5 || $now < $next;
            $next = $now + EVERY;
            for (1 .. $BATCH) {
                $late_sent++ if $stalled_at && $now > $stalled_at + (STALL_MS - 0.6 * TIMEOUT_MS) / 1000;
                Idem::HTTP::pool_submit($p, $req->());
                $sent++;
            }
            if (!$stalled_at && $sent >= $DUPLICATES / 4) {
                Idem::Redis::redis_command('CLIENT', 'PAUSE', STALL_MS, 'ALL');
                $stalled_at = time;
            }
            return 1;
        });
    Idem::HTTP::pool_submit($p, $req->());
    Idem::HTTP::pool_run($p, time + ROUND_LIMIT + 30) or die "bench-stall.pl: a round did not end in time\n";
    my ($n503, $failed) = (0, 0);
    $n503 += $answers{$_} for grep { /^503/ } keys %answers;
    $failed += $answers{$_} for grep { !/^(?:201|503) / } keys %answers;
    return { answers => \%answers, n503 => $n503, failed => $failed, late => scalar @late, late_sent => $late_sent,
             reconnects => scalar(grep { !$before{$_} } keys %{ { clients() } }) };
}

# Every worker connected to Redis before the rounds (a connection opened
# in a round is one opened again).
for my $g (@gws) {
    my $warm = Idem::HTTP::pool_new(concurrency => 20);
    Idem::HTTP::pool_submit($warm, { port => $g->[1]{port}, method => 'POST', path => "/warm/$_", body => 'x',
                                     headers => [['Idempotency-Key', "warm-$g->[1]{name}-$_"]] }) for 1 .. 40;
    Idem::HTTP::pool_run($warm, time + 30);
}

my %rows;
for my $r (1 .. $rounds) {
    for my $g ($r % 2 ? @gws : reverse @gws) {
        my $res = round($g->[1]);
        push @{ $rows{ $g->[0] } }, $res;
        printf STDERR "  round %d, %s: %d × 503 (%d of them sent late in the stall, of %d sent then), %d connections opened again; %s\n",
            $r, $g->[0], $res->{n503}, $res->{late}, $res->{late_sent}, $res->{reconnects},
            join(', ', map { "$_: $res->{answers}{$_}" } sort keys %{ $res->{answers} });
    }
}
Idem::Proc::stop_pid($_) for @busy;

my @lines = ('| module | duplicates per round | 503, per round | of them sent when the stall could not make them miss their deadline | cut off or unanswered, per round | connections to Redis opened again, per round |',
             '|---|---:|---:|---:|---:|---:|');
for my $g (@gws) {
    my @r = @{ $rows{ $g->[0] } };
    my $col = sub { my ($f) = @_; join ' / ', map { $_->{$f} } @r };
    push @lines, sprintf '| %s | %d | %s | %s | %s | %s |', $g->[0], $DUPLICATES, $col->('n503'), $col->('late'),
                         $col->('failed'), $col->('reconnects');
}
my $table = join("\n", @lines) . "\n\n"
          . sprintf("%d round(s); Redis paused for %d ms (idempotency_redis_timeout %d ms) once a quarter of the "
                  . "duplicates were sent; the machine's two cores each held by a busy loop.\n",
                    $rounds, STALL_MS, TIMEOUT_MS);
print $table;
if (defined $out) {
    open my $fh, '>', $out or die "bench-stall.pl: $out: $!\n";
    print {$fh} $table;
    close $fh;
}
Idem::Nginx::nginx_stop($_->[1]) for @gws;
exit 0;
