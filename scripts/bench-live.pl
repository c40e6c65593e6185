#!/usr/bin/env perl
# bench-live.pl — the live-join cell of the benchmark (docs/design.md#live-join):
# what a duplicate that joins a streaming response costs and how late it
# gets each byte. scripts/bench-live.sh runs it (and puts its tables into
# docs/performance.md); scripts/bench.sh runs that.
#
#   scripts/bench-live.pl [--quick] [--rounds N] [--pad B] [--out FILE] [--keep]
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
#   redis-server   --save '' --appendonly no
#   upstream       scripts/upstream.pl: event streams (sse=N&gap=S&pad=B),
#                  each event "id: I\ndata: event I of N<pad>\n\n", one chunk
#   gw1            nginx with the module, 1 worker: the original's gateway
#   gw2            the same with 2 workers (a second listen with reuseport
#                  spreads the connections over both)
#   gwR            a second gateway on the same Redis, 1 worker: its joiners
#                  follow the live log in the store
# All with idempotency_wait 30s, proxy_buffering off, access_log off and
# `add_header X-Worker $pid always` (which worker served a connection).
#
# One client process does all the HTTP, polling every socket (IO::Poll, so
# over 1024 descriptors), and timestamps each event as its last byte is read
# (CLOCK_MONOTONIC, taken once per wake-up for every socket ready in it), so
# that all the clocks agree. Three parts:
#
# 1. Lag: an original on gw1 with joiners on gw1 (same worker) and on gwR
#    (through Redis), and at the same time an original on gw2 with joiners on
#    gw2, kept by their X-Worker: same worker, or the other one. 200 events
#    20 ms apart; the joiners join after event 10. Lag of an event = its
#    arrival at a joiner − its arrival at the original, for the events the
#    upstream sent after the joiner had its head (the catch-up excluded).
#    p50 and p99 against the targets (p99 under 5 ms within a gateway, under
#    20 ms through Redis; printed, not asserted).
# 2. Scale: one stream (events of about 1 KB, 10 ms apart) with J = 0, 1,
#    100, 1000 joiners on gw1 and as many on gwR at the same time, and the
#    same stream through gw1 with the module off (plain), the order shuffled
#    each round; the upstream holds the head back while the joiners connect
#    (sleep=S), so that they join at its start; then 100 replays of the
#    stored response on each gateway. CPU (/proc/PID/schedstat: the time on CPU in ns, finer than
#    stat's utime+stime ticks) of gw1's worker, gwR's worker and
#    redis-server over each stream; a joiner's cost per KB is the worker's
#    CPU over J joiners minus the same over J = 0, ÷ J ÷ KB each got; a
#    replay's is the worker's CPU over the replays ÷ replays ÷ KB. Redis
#    commands (INFO commandstats, scripts' inner commands included) per
#    gwR joiner per second of stream, over the original's own (its appends)
#    and the joiners' claims, at two stream lengths (J = 100).
# 3. Memory: 10 streams of a few thousand events, each with 25 joiners on
#    gw1 and 25 on gwR, in rounds; the workers' VmRSS sampled every 250 ms.
#
# Every loop is bounded in count and time (each stream's clients give up
# after its length plus 60 s). The tables (Markdown) go to stdout and to
# --out FILE. The exit status is non-zero only when the cell could not run
# (a process did not start, a request was not answered); the targets are
# for information.
#
# --pad B: the scale part's events padded with B bytes instead of 1000 (and
# fewer of them, so that the long stream stays under 1 MB, the default
# idempotency_max_response_size): how the cost per KB moves with the size
# of an event. --quick: 1 round, shorter streams (about 1 minute); default: 3 rounds
# (about 3 minutes). Environment: NGINX_BIN, STRESS_MODULE (the module;
# default build/ngx_http_idempotency_module.so), TEST_REDIS_SERVER.
use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/../t/lib";

use Errno qw(EAGAIN EINTR EWOULDBLOCK EINPROGRESS);
use Getopt::Long qw(GetOptions);
use IO::Poll qw(POLLIN POLLHUP POLLERR);
use IO::Socket::INET;
use List::Util qw(shuffle sum max min);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();
use Idem::Upstream ();
use Idem::Wait ();

binmode STDOUT, ':encoding(UTF-8)';
binmode STDERR, ':encoding(UTF-8)';
$| = 1;

my ($quick, $rounds, $out, $keep, $pad) = (0, undef, undef, 0, undef);
GetOptions('quick' => \$quick, 'rounds=i' => \$rounds, 'out=s' => \$out, 'keep' => \$keep, 'pad=i' => \$pad)
    or die "usage: bench-live.pl [--quick] [--rounds N] [--pad B] [--out FILE] [--keep]\n";
$rounds //= $quick ? 1 : 3;
die "bench-live.pl: --rounds must be 1 to 20\n" unless $rounds >= 1 && $rounds <= 20;

my %P = $quick
    ? (lag_events => 200, lag_gap => 0.02, lag_join_after => 10, lag_joiners => 4, lag_joiners2 => 10,
       scale_events => 150, scale_long => 450, scale_gap => 0.01, pad => 1000, replays => 100,
       mem_streams => 10, mem_joiners => 25, mem_events => 1500, mem_gap => 0.002, mem_pad => 100, mem_rounds => 2)
    : (lag_events => 200, lag_gap => 0.02, lag_join_after => 10, lag_joiners => 4, lag_joiners2 => 10,
       scale_events => 200, scale_long => 600, scale_gap => 0.01, pad => 1000, replays => 100,
       mem_streams => 10, mem_joiners => 25, mem_events => 3000, mem_gap => 0.002, mem_pad => 100, mem_rounds => 3);
if (defined $pad) {   # the scale part's events: B bytes of padding (the long stream stays under 1 MB)
    die "bench-live.pl: --pad must be 0 to 60000\n" unless $pad >= 0 && $pad <= 60000;
    $P{pad} = $pad;
    $P{scale_long} = min($P{scale_long}, int(1_000_000 / ($pad + 40)));
    $P{scale_events} = min($P{scale_events}, int($P{scale_long} / 3));
}
my @SCALE_J = (0, 1, 100, 1000);
use constant { LAG_TARGET_GW => 5, LAG_TARGET_REDIS => 20, STREAM_GRACE => 60, FULL_SAMPLE => 5 };

sub now { clock_gettime(CLOCK_MONOTONIC) }
my $T0 = now();
sub note { printf STDERR "  [%6.1fs] %s\n", now() - $T0, join '', @_ }

# ------------------------------------------------------------------ processes

Idem::Proc::init(prefix => 'idempotency-bench-live');
Idem::Proc::keep(1) if $keep;
Idem::Redis::start_redis();
Idem::Upstream::start_upstream();
my ($redis_port, $up_port) = (Idem::Redis::redis_port(), Idem::Upstream::upstream_port());

sub gateway {
    my ($name, $workers, $reuseport) = @_;
    my $loc = join "\n", 'server_name localhost;', 'location /live/ {', '    idempotency on;',
        '    idempotency_scope "";',
        '    idempotency_wait 30s;', '    idempotency_redis_timeout 5s;', '    proxy_buffering off;',
        '    add_header X-Idempotency-Status $idempotency_status always;',
        '    add_header X-Worker $pid always;', '    proxy_pass http://backend;', '}',
        'location /plain/ {', '    proxy_buffering off;', '    add_header X-Worker $pid always;',
        '    proxy_pass http://backend;', '}';
    return Idem::Nginx::nginx_start($name, workers => $workers, ports => 1,
        http => "access_log off;\nupstream backend { server 127.0.0.1:$up_port; }\n"
              . "idempotency_redis 127.0.0.1:$redis_port;",
        server => sub { "listen 127.0.0.1:$_[0]{ports}[0] backlog=4096" . ($reuseport ? ' reuseport' : '') . ";\n$loc" });
}
my %gw = (gw1 => gateway('gw1', 1), gw2 => gateway('gw2', 2, 1), gwR => gateway('gwR', 1));
my %worker = map { my @w = Idem::Nginx::workers_of($gw{$_}{pid}); ($_ => \@w) } keys %gw;
note("redis-server pid ", Idem::Redis::redis_pid(), " :$redis_port; upstream :$up_port; ",
     join '; ', map { "$_ :$gw{$_}{port} workers @{ $worker{$_} }" } sort keys %gw);
sub port_of { $gw{ $_[0] }{ports}[0] }   # the listen with a backlog of 4096 (and reuseport on gw2)

sub cpu_ns {   # time on CPU of a process, ns
    my ($pid) = @_;
    if (open my $fh, '<', "/proc/$pid/schedstat") { my ($ns) = split ' ', <$fh> // ''; return $ns if defined $ns }
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my @f = split ' ', (<$fh> // '') =~ s/.*\) //r;
    return ($f[11] + $f[12]) * 1e9 / 100;
}
sub redis_calls {   # total calls, and the calls per command
    my $info = Idem::Redis::redis_command('INFO', 'commandstats') . Idem::Redis::redis_command('INFO', 'stats');
    my %c = $info =~ /^cmdstat_(\S+?):calls=(\d+)/mg;
    my %us = $info =~ /^cmdstat_(\S+?):calls=\d+,usec=(\d+)/mg;
    delete $c{info};
    $c{"usec:$_"} = $us{$_} for grep { $_ ne 'info' } keys %us;
    ($c{'connections:'}) = $info =~ /^total_connections_received:(\d+)/m;
    return \%c;
}

# ------------------------------------------------------------------ clients

# A client: one POST on its own connection, its response read as it comes;
# the time each event was complete in events[I].
my $RUN = sprintf 'l%d%d', time, $$;
my (%conn, $poll);   # fileno => client
$poll = IO::Poll->new;

sub client {
    my ($gwname, $uri, $key, $role, $light) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => port_of($gwname), Proto => 'tcp', Timeout => 10)
        or die "bench-live.pl: connect to $gwname: $!\n";
    my $req = "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
            . "Content-Length: 1\r\n\r\nx";
    defined syswrite($sock, $req) or die "bench-live.pl: send to $gwname: $!\n";
    $sock->blocking(0);
    my $c = { sock => $sock, gw => $gwname, role => $role, raw => '', head => 0, body => '', ebuf => '',
              bytes => 0, events => [], eof => 0, t_start => now(), light => $light, raw_bytes => 0, tail => '' };
    $conn{ fileno $sock } = $c;
    $poll->mask($sock => POLLIN);
    return $c;
}

sub parse_head {
    my ($c, $t) = @_;
    my $at = index $c->{raw}, "\r\n\r\n";
    return if $at < 0;
    my $head = substr $c->{raw}, 0, $at;
    $c->{raw} = substr $c->{raw}, $at + 4;
    ($c->{status}) = $head =~ m{\AHTTP/1\.\d (\d{3})};
    my %h = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head;
    $c->{headers} = \%h;
    $c->{chunked} = ($h{'transfer-encoding'} // '') =~ /chunked/i;
    $c->{left} = $h{'content-length'};
    $c->{outcome} = $h{'x-idempotency-status'} // '-';
    $c->{worker} = $h{'x-worker'} // 0;
    $c->{t_head} = $t;
    $c->{head} = 1;
}

sub take_body {
    my ($c, $data, $t) = @_;
    $c->{bytes} += length $data;
    $c->{ebuf} .= $data;
    while ((my $end = index $c->{ebuf}, "\n\n") >= 0) {
        my $block = substr $c->{ebuf}, 0, $end + 2, '';
        $c->{events}[$1] //= $t if $block =~ /\Aid: (\d+)\n/;
    }
}

sub feed {
    my ($c, $t) = @_;
    unless ($c->{head}) { parse_head($c, $t); return unless $c->{head} }
    if ($c->{light}) {   # counts the bytes and sees the end, no more
        $c->{raw_bytes} += length $c->{raw};
        $c->{tail} = substr $c->{tail} . $c->{raw}, -10;
        $c->{raw} = '';
        $c->{complete} = 1 if $c->{chunked} ? $c->{tail} =~ /\r\n0\r\n\r\n\z/
                                            : defined $c->{left} && $c->{raw_bytes} >= $c->{left};
        $c->{bytes} = $c->{raw_bytes} unless $c->{chunked};
        return;
    }
    if (!$c->{chunked}) {
        take_body($c, $c->{raw}, $t) if length $c->{raw};
        $c->{complete} = 1 if defined $c->{left} && $c->{bytes} >= $c->{left};
        $c->{raw} = '';
        return;
    }
    while ($c->{raw} =~ /\A([0-9a-fA-F]+)[^\r\n]*\r\n/) {
        my ($size, $at) = (hex $1, length $&);
        if ($size == 0) { $c->{complete} = 1; $c->{raw} = ''; return }
        last if length($c->{raw}) < $at + $size + 2;
        take_body($c, substr($c->{raw}, $at, $size), $t);
        substr $c->{raw}, 0, $at + $size + 2, '';
    }
}

sub drop {
    my ($c) = @_;
    $poll->remove($c->{sock});
    delete $conn{ fileno $c->{sock} };
    close $c->{sock};
    $c->{eof} = 1;
}

# Reads whatever comes until $done->() or $deadline; $tick->() every 250 ms.
sub pump {
    my ($deadline, $done, $tick) = @_;
    my $next_tick = now();
    while (1) {
        return 1 if $done && $done->();
        return 0 unless %conn || $done;
        my $left = $deadline - now();
        return 0 if $left <= 0;
        if ($tick && now() >= $next_tick) { $tick->(); $next_tick = now() + 0.25 }
        my $n = $poll->poll(min($left, 0.05));
        next if !defined $n || $n <= 0;
        my $t = now();
        for my $fh ($poll->handles(POLLIN | POLLHUP | POLLERR)) {
            my $c = $conn{ fileno $fh } or next;
            for (1 .. 16) {
                my $r = sysread $fh, $c->{raw}, 262144, length $c->{raw};
                if (!defined $r) { last if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR; drop($c); last }
                if ($r == 0) { feed($c, $t); drop($c); last }
                feed($c, $t);
                last if $r < 262144;
            }
        }
    }
}
sub all_done { my @c = @_; sub { !grep { !$_->{eof} } @c } }
sub pct {
    my ($p, @v) = @_;
    return undef unless @v;
    @v = sort { $a <=> $b } @v;
    return $v[ max(0, min($#v, int($p / 100 * @v + 0.999999) - 1)) ];
}

# Opens $n joiners on $gwname in batches, reading what comes meanwhile;
# past the first $full (default all), light clients that only count bytes.
sub joiners {
    my ($n, $gwname, $uri, $key, $role, $full) = @_;
    my @j;
    for my $i (1 .. $n) {
        push @j, client($gwname, $uri, $key, $role, $i > ($full // $n));
        pump(now() + 0.001) if $i % 50 == 0;
    }
    return @j;
}

# Every request must be answered 201 and end whole (else the run failed:
# @problems); a duplicate meant to join that came after the end and was
# replayed is only left out of the figures, and said (@late).
my (@problems, @late);
sub check_outcome {
    my ($what, $want, @c) = @_;
    my %n;
    $n{ "$_->{gw} " . ($_->{status} // 0) . ' ' . ($_->{outcome} // '-') . ($_->{complete} ? '' : ' cut') }++ for @c;
    my @bad = grep { !/^\S+ 201 \Q$want\E$/ } keys %n;
    my @failed = grep { !/^\S+ 201 (?:\Q$want\E|replayed)$/ } keys %n;
    my $list = "$what: " . join(', ', map { "$n{$_} × $_" } sort keys %n);
    if (@failed) { push @problems, $list } elsif (@bad) { push @late, $list }
    return \%n;
}

# ------------------------------------------------------------------ 1. lag

my (%lag, %lag_n);   # kind => [lags in ms]; kind => joiners
sub lags_of {
    my ($orig, @j) = @_;
    my @l;
    for my $j (@j) {
        next unless ($j->{outcome} // '') eq 'joined';
        for my $i (1 .. $#{ $orig->{events} }) {
            my ($to, $tj) = ($orig->{events}[$i], $j->{events}[$i]);
            next unless defined $to && defined $tj && $to > $j->{t_head};
            push @l, ($tj - $to) * 1000;
        }
    }
    return @l;
}

for my $round (1 .. $rounds) {
    my ($n, $gap) = @P{qw(lag_events lag_gap)};
    my ($ka, $kb) = ("$RUN-lag-a$round", "$RUN-lag-b$round");
    my ($ua, $ub) = ("/live/lag-a$round?sse=$n&gap=$gap", "/live/lag-b$round?sse=$n&gap=$gap");
    my $oa = client('gw1', $ua, $ka, 'original');
    my $ob = client('gw2', $ub, $kb, 'original');
    pump(now() + 15, sub { defined $oa->{events}[ $P{lag_join_after} ] && defined $ob->{events}[ $P{lag_join_after} ] })
        or die "bench-live.pl: the lag originals did not reach event $P{lag_join_after}\n";
    my @same = joiners($P{lag_joiners}, 'gw1', $ua, $ka, 'same');
    my @redis = joiners($P{lag_joiners}, 'gwR', $ua, $ka, 'redis');
    my @two = joiners($P{lag_joiners2}, 'gw2', $ub, $kb, 'two');
    my @all = ($oa, $ob, @same, @redis, @two);
    pump(now() + $n * $gap + STREAM_GRACE, all_done(@all)) or die "bench-live.pl: the lag streams did not end\n";
    check_outcome("lag round $round, original", 'new', $oa, $ob);
    check_outcome("lag round $round, joiners", 'joined', @same, @redis, @two);
    my @same2 = grep { $_->{worker} == $ob->{worker} } @two;
    my @other = grep { $_->{worker} != $ob->{worker} } @two;
    push @{ $lag{same} }, lags_of($oa, @same);
    push @{ $lag{same2} }, lags_of($ob, @same2);
    push @{ $lag{other} }, lags_of($ob, @other);
    push @{ $lag{redis} }, lags_of($oa, @redis);
    $lag_n{same} += @same; $lag_n{same2} += @same2; $lag_n{other} += @other; $lag_n{redis} += @redis;
    note("lag round $round: joiners same worker ", scalar @same, ", 2 workers: same ", scalar @same2,
         " other ", scalar @other, ", gwR ", scalar @redis);
}

# ------------------------------------------------------------------ 2. scale

my %scale;   # "J" or "long" => [ {gw1, gwR, redis ns; calls; secs; kb; ...} per round ]
my %replay;  # gw => [ ns per replay per KB ]
sub measure {
    my ($code) = @_;
    my @pids = ($worker{gw1}[0], $worker{gwR}[0], Idem::Redis::redis_pid());
    my @c0 = map { cpu_ns($_) } @pids;
    my $calls0 = redis_calls();
    my $t0 = now();
    my $r = $code->();
    my $secs = now() - $t0;
    my @c1 = map { cpu_ns($_) } @pids;
    my $calls1 = redis_calls();
    my %d = map { $_ => ($calls1->{$_} // 0) - ($calls0->{$_} // 0) } keys %$calls1;
    my %extra = map { $_ => delete $d{$_} } grep { /:/ } keys %d;
    $r->{gw1} = $c1[0] - $c0[0];
    $r->{gwR} = $c1[1] - $c0[1];
    $r->{redis} = $c1[2] - $c0[2];
    $r->{calls} = sum(0, values %d);
    $r->{calls_by} = \%d;
    $r->{redis_extra} = \%extra;
    $r->{secs} = $secs;
    return $r;
}

# The upstream holds the head back this long (sleep=S): the joiners connect
# meanwhile (duplicates watching for the head), so that they join at its
# start even when the machine is slow to connect them.
sub join_time { my ($j) = @_; return sprintf '%.1f', min(12, 0.5 + $j * 2 * 0.003) }

sub scale_run {
    my ($round, $label, $j, $events) = @_;
    my $key = "$RUN-scale-$label-$round";
    my $sleep = join_time($j);
    my $where = $label eq 'plain' ? 'plain' : 'live';   # plain: the module off, the same stream proxied
    my $uri = "/$where/scale-$label-$round?sse=$events&gap=$P{scale_gap}&pad=$P{pad}&sleep=$sleep";
    my $r = measure(sub {
        my $o = client('gw1', $uri, $key, 'original');
        pump(now() + 0.05, sub { 0 });   # the original's claim first
        my $tj = now();
        my @a = joiners($j, 'gw1', $uri, $key, 'same', FULL_SAMPLE);
        my @b = joiners($j, 'gwR', $uri, $key, 'redis', FULL_SAMPLE);
        my $joined_in = now() - $tj;
        pump(now() + $sleep + $events * $P{scale_gap} + STREAM_GRACE, all_done($o, @a, @b))
            or die "bench-live.pl: $label: the stream did not end\n";
        check_outcome("scale $label round $round, original", $label eq 'plain' ? '-' : 'new', $o);
        check_outcome("scale $label round $round, joiners", 'joined', @a, @b);
        my @ja = grep { ($_->{outcome} // '') eq 'joined' && $_->{complete} } @a;
        my @jb = grep { ($_->{outcome} // '') eq 'joined' && $_->{complete} } @b;
        # a joiner that ended whole got the original's body
        my $span = defined $o->{events}[-1] ? $o->{events}[-1] - $o->{t_head} : 0;   # the head to the last event
        return { j => $j, kb => $o->{bytes} / 1024, joined_in => $joined_in, span => $span,
                 kb_a => @ja * $o->{bytes} / 1024, kb_b => @jb * $o->{bytes} / 1024,
                 lag_a => [lags_of($o, @ja)], lag_b => [lags_of($o, @jb)], uri => $uri, key => $key };
    });
    push @{ $scale{$label} }, $r;
    note(sprintf "scale %s round %d: %d+%d joiners, %.0f KB each, joined in %.2fs; CPU gw1 %.1f ms, gwR %.1f ms, redis %.1f ms; %d Redis calls in %.1fs (%s)",
         $label, $round, $j, $j, $r->{kb}, $r->{joined_in}, $r->{gw1} / 1e6, $r->{gwR} / 1e6, $r->{redis} / 1e6, $r->{calls}, $r->{secs},
         join ' ', map { "$_=$r->{redis_extra}{$_}" } sort grep { $r->{redis_extra}{$_} } keys %{ $r->{redis_extra} });
    return $r;
}

sub replay_run {
    my ($round, $r) = @_;
    my $n = $P{replays};
    my $m = measure(sub {
        my @a = map { client('gw1', $r->{uri}, $r->{key}, 'replay', 1) } 1 .. $n;
        my @b = map { client('gwR', $r->{uri}, $r->{key}, 'replay', 1) } 1 .. $n;
        pump(now() + STREAM_GRACE, all_done(@a, @b)) or die "bench-live.pl: the replays did not end\n";
        check_outcome("replay round $round", 'replayed', @a, @b);
        my @ok = grep { ($_->{outcome} // '') eq 'replayed' && $_->{complete} } @a, @b;
        push @problems, "replay round $round: not $r->{kb} KB each" if grep { abs($_->{bytes} / 1024 - $r->{kb}) > 0.01 } @ok;
        return { kb_a => (grep { $_->{gw} eq 'gw1' } @ok) * $r->{kb}, kb_b => (grep { $_->{gw} eq 'gwR' } @ok) * $r->{kb} };
    });
    push @{ $replay{gw1} }, $m->{gw1} / $m->{kb_a};
    push @{ $replay{gwR} }, $m->{gwR} / $m->{kb_b};
    note(sprintf "replay round %d: %d+%d replays of %.0f KB: CPU gw1 %.1f ms, gwR %.1f ms",
         $round, $n, $n, $r->{kb}, $m->{gw1} / 1e6, $m->{gwR} / 1e6);
}

for my $round (1 .. $rounds) {
    my $stored;
    for my $j (shuffle 'plain', @SCALE_J) {
        my $r = scale_run($round, $j, $j eq 'plain' ? 0 : $j, $P{scale_events});
        $stored = $r if $j eq '100';
    }
    scale_run($round, 'long', 100, $P{scale_long});
    replay_run($round, $stored);
}

# ------------------------------------------------------------------ 3. memory

my @mem;   # per round: {gw => [first, peak, last, after]}
sub rss { my ($g) = @_; local $_; return Idem::Proc::vm_rss_kb($worker{$g}[0]) // 0 }   # (it reads into $_)
my %rss0 = map { $_ => rss($_) } qw(gw1 gwR);
for my $round (1 .. $P{mem_rounds}) {
    my %s = (gw1 => [], gwR => []);
    my $sample = sub { for my $g (qw(gw1 gwR)) { push @{ $s{$g} }, rss($g) } };
    my (@o, @j);
    my $sleep = join_time($P{mem_streams} * $P{mem_joiners});
    my $uri = sub { "/live/mem-$round-$_[0]?sse=$P{mem_events}&gap=$P{mem_gap}&pad=$P{mem_pad}&sleep=$sleep" };
    for my $i (1 .. $P{mem_streams}) { push @o, client('gw1', $uri->($i), "$RUN-mem-$round-$i", 'original') }
    pump(now() + 0.05, sub { 0 });
    for my $i (1 .. $P{mem_streams}) {
        push @j, joiners($P{mem_joiners}, 'gw1', $uri->($i), "$RUN-mem-$round-$i", 'same', 0),
                 joiners($P{mem_joiners}, 'gwR', $uri->($i), "$RUN-mem-$round-$i", 'redis', 0);
    }
    pump(now() + 15, sub { !grep { !defined $_->{events}[1] } @o }) or die "bench-live.pl: memory: no first events\n";
    $sample->();
    pump(now() + $P{mem_events} * $P{mem_gap} * 3 + STREAM_GRACE, all_done(@o, @j), $sample)
        or die "bench-live.pl: memory: the streams did not end\n";
    check_outcome("memory round $round, joiners", 'joined', @j);
    my %after = map { $_ => rss($_) } qw(gw1 gwR);
    push @mem, { map { my $v = $s{$_}; ($_ => [$v->[0], max(@$v), $v->[-1], $after{$_}, scalar @$v]) } qw(gw1 gwR) };
    push @{ $mem[-1]{body_kb} }, $o[0]{bytes} / 1024;
    note(sprintf "memory round %d: %d streams × %d+%d joiners, %.0f KB each; gw1 RSS %s → %s (peak %s), gwR %s → %s (peak %s), after: %s, %s",
         $round, $P{mem_streams}, $P{mem_joiners}, $P{mem_joiners}, $o[0]{bytes} / 1024,
         @{ $mem[-1]{gw1} }[0, 2, 1], @{ $mem[-1]{gwR} }[0, 2, 1], $after{gw1}, $after{gwR});
}

# ------------------------------------------------------------------ report

my $rep = '';
sub say { $rep .= join('', @_) . "\n" }
sub fmt { defined $_[1] ? sprintf($_[0], $_[1]) : '—' }
sub cost { defined $_[1] && $_[1] < 0 ? '≈ 0 (noise)' : fmt(@_) }   # a difference lost in the noise
sub med { my @s = sort { $a <=> $b } @_; return undef unless @s; @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2 }

say "| joiner | joiners | events measured | lag p50 ms | lag p99 ms | max ms | target p99 | met |";
say "|---|---:|---:|---:|---:|---:|---:|---|";
for (['same', 'same worker (1 worker)', LAG_TARGET_GW], ['same2', 'same worker (2 workers)', LAG_TARGET_GW],
     ['other', 'other worker (2 workers, through Redis and the live board)', LAG_TARGET_GW], ['redis', 'other gateway (through Redis)', LAG_TARGET_REDIS]) {
    my ($k, $label, $target) = @$_;
    my @l = @{ $lag{$k} // [] };
    my $p99 = pct(99, @l);
    say sprintf "| %s | %d | %d | %s | %s | %s | < %d ms | %s |", $label, $lag_n{$k} // 0, scalar @l,
        fmt('%.2f', pct(50, @l)), fmt('%.2f', $p99), fmt('%.2f', @l ? max(@l) : undef), $target,
        !defined $p99 ? '—' : $p99 < $target ? 'met' : '**not met**';
}
say "";
for my $k (qw(other redis)) {   # where the lag through the store lies
    my @l = @{ $lag{$k} // [] } or next;
    my @edges = (1, 2, 4, 6, 8, 10, 12, 16, 20, 25);
    my @n = (0) x (@edges + 1);
    for my $v (@l) { my $i = 0; $i++ while $i < @edges && $v >= $edges[$i]; $n[$i]++ }
    say "- ", ($k eq 'redis' ? 'other gateway' : 'other worker'), ", lags by ms: ",
        join(', ', map { ($_ == 0 ? "< $edges[0]" : $_ == @edges ? "≥ $edges[-1]" : "$edges[$_-1]–$edges[$_]") . " $n[$_]" } 0 .. $#n), ".";
}
say "";

# per joiner per KB: marginal over J = 0 (the original alone), medians over the rounds
my $base = { map { my $k = $_; ($k => med(map { $_->{$k} } @{ $scale{0} })) } qw(gw1 gwR redis) };
# Redis: the original alone makes base_rate calls a second of its stream (its
# appends) and base_sets SETs (its claim); over that, each joiner's claim
# (a SET) once, and then the reads of gwR's feed while the stream runs.
my $base_rate = med(map { $_->{span} ? $_->{calls} / $_->{span} : () } @{ $scale{0} }) // 0;
my $base_sets = med(map { $_->{calls_by}{set} // 0 } @{ $scale{0} }) // 0;
my %rep_med = map { $_ => med(@{ $replay{$_} }) } qw(gw1 gwR);
say "| joiners per gateway | KB each | gw1 worker µs per joiner per KB (same worker) | gwR worker µs per joiner per KB (through Redis) | redis-server µs per gwR joiner per KB | × replay, gw1 | × replay, gwR | Redis commands per gwR joiner per s of stream | SETs per joiner | lag p50 / p99 ms, gw1 | lag p50 / p99 ms, gwR |";
say "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|";
for my $label (1, 100, 1000, 'long') {
    my @r = @{ $scale{$label} // [] } or next;
    my $j = $r[0]{j};
    my %per = map { my $k = $_; my $kbk = $k eq 'gw1' ? 'kb_a' : 'kb_b';
                    ($k => med(map { $_->{$kbk} ? ($_->{$k} - ($label eq 'long' ? 0 : $base->{$k})) / 1000 / $_->{$kbk} : () } @r)) } qw(gw1 gwR redis);
    my $cps = med(map { my $sets = ($_->{calls_by}{set} // 0) - $base_sets;
                        $_->{span} ? ($_->{calls} - $sets - $base_rate * $_->{span}) / $j / $_->{span} : () } @r);
    my $claims = med(map { (($_->{calls_by}{set} // 0) - $base_sets) / (2 * $j) } @r);
    my @la = map { @{ $_->{lag_a} } } @r;
    my @lb = map { @{ $_->{lag_b} } } @r;
    say sprintf "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |",
        $label eq 'long' ? "100 (a stream $P{scale_long}/$P{scale_events} × as long)" : $j, med(map { $_->{kb} } @r),
        ($label eq 'long' ? ('—', cost('%.2f', $per{gwR}), cost('%.3f', $per{redis}), '—')
                          : (cost('%.2f', $per{gw1}), cost('%.2f', $per{gwR}), cost('%.3f', $per{redis}),
                             defined $per{gw1} && $rep_med{gw1} ? cost("%.2f", $per{gw1} / ($rep_med{gw1} / 1000)) : "—")),
        $label eq 'long' ? '—' : defined $per{gwR} && $rep_med{gwR} ? cost("%.2f", $per{gwR} / ($rep_med{gwR} / 1000)) : "—",
        cost('%.2f', $cps), fmt('%.2f', $claims), fmt('%.1f', pct(50, @la)), fmt('%.1f', pct(99, @la)), fmt('%.1f', pct(50, @lb)), fmt('%.1f', pct(99, @lb));
}
say "";
say "The lag columns come from 5 joiners a gateway read in full (the others only count their bytes); with 1000 joiners a gateway they measure the client, one process reading 2000 streams, more than the gateways.";
say "";
say sprintf "| replay of the same response | µs per replay per KB |";
say "|---|---:|";
say sprintf "| gw1 (%d replays a round) | %s |", $P{replays}, fmt('%.2f', $rep_med{gw1} && $rep_med{gw1} / 1000);
say sprintf "| gwR (%d replays a round) | %s |", $P{replays}, fmt('%.2f', $rep_med{gwR} && $rep_med{gwR} / 1000);
say "";
say "";
say sprintf "Baseline (the original alone, J = 0), median: gw1 worker %.1f ms, gwR worker %.1f ms, redis-server %.1f ms a stream of %.0f KB; %.0f Redis commands a second of the stream (its appends). A joiner's CPU on gw1 is the worker's over the original alone; with 1 joiner that difference is within the noise of the original's own CPU.",
    $base->{gw1} / 1e6, $base->{gwR} / 1e6, $base->{redis} / 1e6, med(map { $_->{kb} } @{ $scale{0} }) // 0, $base_rate;
my $plain = { map { my $k = $_; ($k => med(map { $_->{$k} } @{ $scale{plain} })) } qw(gw1 redis span) };
if (@{ $scale{plain} // [] }) {
    my $events = $P{scale_events};
    say "";
    say sprintf "The same stream proxied with the module off (plain `proxy_pass`): gw1 worker %.1f ms a stream, %.0f µs an event; with the module on and no joiner, %.0f µs an event (%.2f × plain), redis-server %.0f µs an event (the live log's appends).",
        $plain->{gw1} / 1e6, $plain->{gw1} / 1e3 / $events, $base->{gw1} / 1e3 / $events,
        $plain->{gw1} ? $base->{gw1} / $plain->{gw1} : 0, $base->{redis} / 1e3 / $events;
}
my %by;
for my $r (@{ $scale{100} // [] }) { $by{$_} += $r->{calls_by}{$_} for keys %{ $r->{calls_by} } }
say "";
say "Redis commands over the 100-joiner streams, by command: ",
    join(', ', map { "$_ $by{$_}" } sort { $by{$b} <=> $by{$a} } grep { $by{$_} } keys %by), ".";
say "";
say "| memory round | body KB a stream | gw1 worker RSS KB: first → last sample (peak) → after | gwR worker RSS KB: first → last sample (peak) → after | samples |";
say "|---:|---:|---|---|---:|";
for my $i (0 .. $#mem) {
    my $m = $mem[$i];
    say sprintf "| %d | %.0f | %d → %d (%d) → %d | %d → %d (%d) → %d | %d |", $i + 1, $m->{body_kb}[0],
        @{ $m->{gw1} }[0, 2, 1, 3], @{ $m->{gwR} }[0, 2, 1, 3], $m->{gw1}[4];
}
say "";
say sprintf "Worker RSS before the memory rounds: gw1 %d KB, gwR %d KB. %d streams × (%d + %d) joiners, %d events each %s ms apart.",
    $rss0{gw1}, $rss0{gwR}, $P{mem_streams}, $P{mem_joiners}, $P{mem_joiners}, $P{mem_events}, $P{mem_gap} * 1000;
if (@late) { say ""; say "Joiners that came after their stream ended (replayed, left out of the figures): ", join('; ', @late), "." }
if (@problems) { say ""; say "Problems: ", join('; ', @problems), "." }

print "\n", $rep;
if ($out) { open my $fh, '>:encoding(UTF-8)', $out or die "$out: $!\n"; print $fh $rep; close $fh }
note("done");
exit(@problems ? 1 : 0);
