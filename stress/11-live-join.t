# Scenario 11: live joining under load (docs/design.md#live-join). Two
# gateways (2 workers each) on one Redis; 30 keys at once (STRESS_SCALE
# scales them, at least 6), each an event stream of 6 events behind a gate
# of its own (scripts/upstream.pl sse=6&gate=...), with its original and 20
# joiners spread over both gateways, so that a joiner follows the
# original's feed in its worker or the live log in Redis. Five kinds of
# key, a fifth each: nothing happens; the original client leaves after
# event 1; the upstream dies after event 3 (die_after=3); the stream
# outgrows idempotency_max_response_size (8k) at event 3; the original
# client leaves and the upstream dies. A fifth of the joiners leave after
# event 2. The gates open one event at a time for every key at once, each
# step awaited by every client still there. Rounds 1 and 2 are the same
# (the workers' VmRSS after each: no growth past 20%); round 3 restarts
# Redis (same port, AOF on) after event 2.
#
# Invariants, for every key: the upstream executed it once; every joiner
# got the head at once (201, joined, the event-stream headers) and a
# prefix of its key's stream, never a byte of another key's (each key's
# events carry a padding of their own length); a joiner that stayed got
# the whole stream and its end when the upstream finished and the
# response fit, else was cut off (a prefix, never more than the 8k the
# log keeps); the original client that stayed got the whole stream, or,
# when its upstream died, a prefix cut off; a retry after the end gets
# the replay (the whole stream) or 410 (died, too large); no worker
# crashed or was replaced; no alert in the error logs. In round 3 a joiner
# in another worker may be cut off where the restart broke the live log,
# and a retry may find the claim the restart left (409, 503): counted,
# never a second execution nor foreign bytes. How long after the gate of
# its last event each response ended is printed, by kind.
#
# Before the rounds, "Redis gone at the end": 8 streams on a gateway of
# one worker end (outgrowing the limit) while Redis is down and the
# worker's connection to it waits out its reconnect backoff; their
# original clients get their whole responses and the worker lives on.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use IO::Select;
use Errno qw(EINTR);
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Live;
use Idem::Nginx;
use Idem::Proc;
use Idem::Redis;
use Idem::Stress;
use Idem::Upstream;

use constant {
    EVENTS         => 6,
    DIE_AFTER      => 3,
    JOINERS        => 20,     # per key, half on each gateway
    MAX_SIZE       => 8192,   # idempotency_max_response_size
    BIG_PAD        => 3000,   # a big stream's events: ~3 kB each, past MAX_SIZE at event 3
    BIG_FIT        => 2,      # ... so its first 2 events are all its log keeps
    LOCK_TTL       => 5,      # s, idempotency_lock_ttl (a stopped live log is gone after it)
    STEP_LIMIT     => 20,     # s for every client to get an event (or its end)
    END_LIMIT      => 30,     # s for every response to end after the last gate
    RSS_GROWTH_MAX => 0.20,
    TIME_LIMIT     => 150,    # s for the whole scenario
};

my $KEYS = Idem::Stress::scaled(30, 6);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(11, "live joining: $KEYS event streams at once, each with its original and "
    . JOINERS . ' joiners over two gateways; originals and joiners leave, upstreams die, streams outgrow '
    . 'idempotency_max_response_size; 3 rounds, Redis restarted in the third');
my $loc = "        location /s11/ { idempotency on; idempotency_wait 10s; idempotency_lock_ttl " . LOCK_TTL . 's; '
        . 'idempotency_max_response_size ' . MAX_SIZE . "; proxy_buffering off; proxy_pass http://payments; }\n";
my @gws = map { Idem::Stress::gateway($_, workers => 2, locations => $loc) } qw(s11a s11b);
my %workers = map { my $g = $_; ($g->{name} => [sort { $a <=> $b } Idem::Nginx::workers_of($g->{pid})]) } @gws;

# ------------------------------------------------------------ the clients

# Reads every open stream at once, as Idem::Live reads one, until $done
# (checked every 50 ms) is true or $secs have passed; true when $done is.
sub pump {
    my ($streams, $secs, $done) = @_;
    my $deadline = time + $secs;
    my @open = grep { !$_->{eof} } @$streams;
    my %by_fd = map { fileno($_->{sock}) => $_ } @open;
    my $sel = IO::Select->new(map { $_->{sock} } @open);
    my $check = 0;
    while (1) {
        if (time >= $check) {
            return 1 if $done->();
            $check = time + 0.05;
        }
        return $done->() if !$sel->count || time >= $deadline;
        for my $sock ($sel->can_read(0.05)) {
            my $s = $by_fd{ fileno $sock };
            my $n = sysread($sock, $s->{raw}, 65536, length $s->{raw});
            next if !defined $n && $! == EINTR;
            next if $n;
            ($s->{eof}, $s->{eof_at}) = (1, time);
            $sel->remove($sock);
        }
    }
}

# The stream key $k's upstream sends: event i is "id: i\ndata: event i of
# 6<pad>\n\n", the padding of a length of the key's own.
sub event {
    my ($k, $i) = @_;
    return "id: $i\ndata: event $i of " . ($k->{events} // EVENTS) . ('p' x $k->{pad}) . "\n\n";
}

sub prefix_of { my ($body, $k) = @_; return substr($k->{stream}, 0, length $body) eq $body }

# Bytes of another key: a data line whose padding is not the key's.
sub foreign {
    my ($body, $k) = @_;
    for my $pad ($body =~ /^data: event \d+ of \d+(p*)$/mg) { return 1 if length $pad != $k->{pad} }
    return 0;
}

# The response as far as it came (one that did not end, past the bounds
# of pump, is taken as it is: cut off).
sub finish {
    my ($s) = @_;
    close $s->{sock} unless $s->{eof};
    $s->{eof} = 1;
    return $s->finish(0);
}

# The body the client has so far (parsed again only when more came).
sub body_of {
    my ($c) = @_;
    my $len = length $c->{s}{raw};
    ($c->{body}, $c->{parsed}) = ($c->{s}->body, $len) if ($c->{parsed} // -1) != $len;
    return $c->{body};
}

# Every client still there (not gone, not ended) has the stream up to
# event $i.
sub all_reached {
    my ($clients, $i) = @_;
    return sub {
        for my $c (@$clients) {
            next if $c->{gone} || $c->{s}{eof};
            return 0 if length(body_of($c)) < $c->{k}{ends}[$i];
        }
        return 1;
    };
}

# ------------------------------------------------------------ a round

sub round {
    my ($r, %o) = @_;
    my $t0 = time;
    my @keys;
    for my $i (1 .. $KEYS) {
        my $kind = (qw(plain orig-leaves died big died+orig-leaves))[ ($i - 1) % 5 ];
        my $k = { i => $i, kind => $kind, path => "/s11/r$r/k$i", key => "s11-r$r-k$i",
                  gw => $gws[ $i % 2 ], pad => ($kind eq 'big' ? BIG_PAD : 0) + $i,
                  died => ($kind =~ /died/ ? 1 : 0), leaves => ($kind =~ /orig-leaves/ ? 1 : 0) };
        $k->{uri} = "$k->{path}?sse=" . EVENTS . "&gate=s11r${r}k$i&pad=$k->{pad}"
                  . ($k->{died} ? '&die_after=' . DIE_AFTER : '');
        $k->{stream} = join '', map { event($k, $_) } 1 .. EVENTS;
        $k->{ends} = [0, map { length join '', map { event($k, $_) } 1 .. $_ } 1 .. EVENTS];
        push @keys, $k;
    }
    my (@clients, @originals, @joiners);
    # The originals, and each one's first event.
    for my $k (@keys) {
        my $c = { k => $k, role => 'original', s => Idem::Live::post($k->{gw}{port}, $k->{uri}, $k->{key}) };
        push @originals, $c;
        $k->{original} = $c;
    }
    push @clients, @originals;
    my $ok = pump([map { $_->{s} } @clients], STEP_LIMIT, all_reached(\@originals, 1));
    Idem::Stress::check($sc, $ok, "round $r: every original got its first event",
                        "round $r: not every original got its first event within " . STEP_LIMIT . ' s');
    # The joiners, half on each gateway; each gets the head and event 1.
    for my $k (@keys) {
        for my $j (1 .. JOINERS) {
            my $c = { k => $k, role => 'joiner', j => $j,
                      s => Idem::Live::post($gws[ $j % 2 ]{port}, $k->{uri}, $k->{key}),
                      leaves => ($k->{i} + $j) % 5 == 0 };
            push @joiners, $c;
            push @{ $k->{joiners} }, $c;
        }
    }
    push @clients, @joiners;
    my @streams = map { $_->{s} } @clients;
    $ok = pump(\@streams, STEP_LIMIT, all_reached(\@joiners, 1));
    Idem::Stress::check($sc, $ok, "round $r: every joiner got the head and event 1",
                        "round $r: not every joiner got the head and event 1 within " . STEP_LIMIT . ' s');
    my $joined_at = time;
    # Some original clients go away.
    for my $c (grep { $_->{k}{leaves} } @originals) {
        $c->{body_at_leave} = $c->{s}->body;
        $c->{s}->close;
        $c->{gone} = 1;
    }
    # The gates open one event at a time; every client still there gets it
    # (or its end) before the next.
    my $t_steps = time;
    my (@steps, @gate_at);
    for my $i (2 .. EVENTS) {
        my $t_step = time;
        Idem::Live::open_gate("s11r${r}k$_->{i}", $i) for @keys;
        $gate_at[$i] = time;
        $ok = pump(\@streams, 1, all_reached(\@clients, $i)) || do {
            if ($ENV{STRESS_VERBOSE}) {
                my @late = grep { !$_->{gone} && !$_->{s}{eof} && length(body_of($_)) < $_->{k}{ends}[$i] } @clients;
                my %by;
                $by{"$_->{k}{kind} $_->{role}"}++ for @late;
                Idem::Stress::vnote("round $r: event $i not there after 1 s: " . Idem::Stress::answers_text(\%by));
            }
            pump(\@streams, STEP_LIMIT, all_reached(\@clients, $i));
        };
        Idem::Stress::check($sc, $ok, "round $r: event $i reached every client still there",
                            "round $r: event $i did not reach every client within " . STEP_LIMIT . ' s') or last;
        push @steps, sprintf '%.2f', time - $t_step;
        if ($i == 2) {
            # Some joiners go away.
            for my $c (grep { $_->{leaves} } @joiners) {
                $c->{body_at_leave} = $c->{s}->body;
                $c->{s}->close;
                $c->{gone} = 1;
            }
            if ($o{redis_restart}) {
                my ($pid, $t) = (Idem::Redis::redis_pid(), time);
                Idem::Redis::stop_redis();
                Idem::Redis::start_redis();
                Idem::Stress::note(sprintf 'round %d: Redis restarted after event 2 (pid %d -> %d, down %.2f s)',
                                   $r, $pid, Idem::Redis::redis_pid(), time - $t);
            }
        }
    }
    my $t_last = time;
    $ok = pump(\@streams, END_LIMIT, sub { !grep { !$_->{eof} } @streams });
    Idem::Stress::check($sc, $ok, "round $r: every response ended", "round $r: "
        . scalar(grep { !$_->{eof} } @streams) . ' responses had not ended ' . END_LIMIT . ' s after the last gate');
    my $t_end = time;
    push @steps, sprintf 'end %.2f', $t_end - $t_last;
    $_->{res} = finish($_->{s}) for grep { !$_->{gone} } @clients;
    $sc->{requests} += grep { $_->{gone} } @clients;
    Idem::Stress::count_answer($sc, $_->{res}) for grep { !$_->{gone} } @clients;

    # Retries after the end, one on each gateway per key.
    my @retries;
    for my $k (@keys) {
        push @retries, map { { k => $k, s => Idem::Live::post($_->{port}, $k->{uri}, $k->{key}) } } @gws;
    }
    pump([map { $_->{s} } @retries], END_LIMIT, sub { !grep { !$_->{s}{eof} } @retries });
    $_->{res} = finish($_->{s}) for @retries;
    Idem::Stress::count_answer($sc, $_->{res}) for @retries;

    # The verdict.
    my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
    my (%bad, %tally, %ends);
    my $bad = sub { my ($what, $c, $why) = @_; push @{ $bad{$what} }, "$c->{k}{key} $c->{role}"
                    . ($c->{j} ? " $c->{j}" : '') . ": $why" };
    for my $k (@keys) {
        my $n = $counts->{ $k->{path} };
        $sc->{executions} += $n;
        $sc->{duplicates} += $n - 1 if $n > 1;
        push @{ $bad{executions} }, "$k->{key}: $n executions" if $n != 1;
    }
    my $cut_expected = sub { my ($k) = @_; return $k->{died} || $k->{kind} eq 'big' };
    for my $c (@clients) {
        my $k = $c->{k};
        my $res = $c->{res};
        my $body = $c->{gone} ? $c->{body_at_leave} : $res->{body};
        $bad->('foreign', $c, 'bytes of another key') if foreign($body, $k);
        $bad->('prefix', $c, 'not a prefix of its stream (' . length($body) . ' bytes)') unless prefix_of($body, $k);
        if ($c->{role} eq 'joiner') {
            my $h = $res ? $res->{headers} : undef;
            if ($res) {
                my $st = $h->{'x-idempotency-status'} // '';
                $tally{"joiner head $res->{status}/$st"}++;
                $bad->('head', $c, "$res->{status}/$st, Idempotent-Replayed " . ($h->{'idempotent-replayed'} // '-')
                       . ', Content-Type ' . ($h->{'content-type'} // '-'))
                    unless $res->{status} == 201 && $st eq 'joined' && ($h->{'idempotent-replayed'} // '') eq 'true'
                        && ($h->{'content-type'} // '') eq 'text/event-stream'
                        && ($h->{'x-upstream-execution'} // '') eq '1';
            }
        }
        next if $c->{gone};
        my $label = $res->{complete} ? 'whole' : 'cut off';
        $label .= ' (the whole stream)' if !$res->{complete} && $res->{body} eq $k->{stream};
        $tally{"$k->{kind} $c->{role}: $label"}++;
        # how long after the gate that let its last event out the response ended
        my $last = $k->{died} || ($k->{kind} eq 'big' && $c->{role} eq 'joiner') ? DIE_AFTER : EVENTS;
        push @{ $ends{"$k->{kind} $c->{role}"} }, $c->{s}{eof_at} - $gate_at[$last] if $c->{s}{eof_at} && $gate_at[$last];
        if ($c->{role} eq 'original') {
            $bad->('original', $c, "status $res->{status}") if $res->{status} != 201;
            if ($k->{died}) {
                $bad->('original', $c, 'whole, though its upstream died') if $res->{complete};
            } else {
                $bad->('original', $c, "$label, " . length($res->{body}) . ' bytes of ' . length($k->{stream}))
                    unless $res->{complete} && $res->{body} eq $k->{stream};
            }
            next;
        }
        if ($cut_expected->($k)) {
            # every byte the capture kept: up to the upstream's death, or
            # the events that fit idempotency_max_response_size
            my $kept = $k->{ends}[ $k->{died} ? DIE_AFTER : BIG_FIT ];
            $bad->('joiner', $c, 'whole, though its original was cut off') if $res->{complete};
            $bad->('joiner', $c, length($res->{body}) . ' bytes, more than idempotency_max_response_size')
                if length($res->{body}) > MAX_SIZE;
            $bad->('joiner', $c, 'cut off after ' . length($res->{body}) . " bytes, not after the $kept bytes kept")
                if length($res->{body}) != $kept && !($o{redis_restart} && length($res->{body}) < $kept);
        } elsif (!($res->{complete} && $res->{body} eq $k->{stream})) {
            # round 3: a joiner in another worker whose live log the
            # restart broke is cut off, with a prefix
            if ($o{redis_restart} && !$res->{complete}) { $tally{"cut off by the Redis restart"}++ }
            else { $bad->('joiner', $c, "$label, " . length($res->{body}) . ' bytes of ' . length($k->{stream})) }
        }
    }
    for my $rt (@retries) {
        my ($k, $res) = ($rt->{k}, $rt->{res});
        my $c = { k => $k, role => 'retry' };
        my $st = $res->{headers}{'x-idempotency-status'} // '';
        my $label = "$res->{status}/$st";
        $tally{"$k->{kind} retry: $label"}++;
        $bad->('foreign', $c, 'bytes of another key') if foreign($res->{body}, $k);
        if ($cut_expected->($k)) {
            next if $res->{status} == 410;
        } elsif ($res->{status} == 201) {
            next if $res->{complete} && $res->{body} eq $k->{stream}
                 && ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
        }
        next if $o{redis_restart} && $res->{status} =~ /^(?:409|503)$/;
        $bad->('retry', $c, "$label, " . ($res->{complete} ? 'whole' : 'cut off') . ', ' . length($res->{body}) . ' bytes');
    }
    my %what = (
        executions => 'every key executed once',
        foreign    => 'no client got bytes of another key',
        prefix     => 'every client got a prefix of its stream',
        head       => 'every joiner got the head at once: 201, joined, Idempotent-Replayed, the event-stream headers',
        original   => 'every original client that stayed got the whole stream, or a prefix cut off when its upstream died',
        joiner     => 'every joiner that stayed got the whole stream and its end, or was cut off when its original was',
        retry      => 'every retry after the end got the replay, or 410 when the stream died or outgrew the limit',
    );
    for my $what (qw(executions foreign prefix head original joiner retry)) {
        my @b = @{ $bad{$what} // [] };
        Idem::Stress::check($sc, !@b, "round $r: $what{$what}", "round $r: " . scalar(@b) . " violations: $what{$what}");
        Idem::Stress::note("  $_") for @b[0 .. ($#b < 9 ? $#b : 9)];
    }
    push @{ $sc->{notes} }, sprintf('round %d: %d keys, %d clients, %d retries; joined in %.2f s, gates and ends %.2f s, '
        . 'round %.1f s (steps: %s s)', $r, scalar @keys, scalar @clients, scalar @retries, $joined_at - $t0, $t_end - $t_steps,
        time - $t0, join(', ', @steps));
    push @{ $sc->{notes} }, "round $r: " . Idem::Stress::answers_text(\%tally);
    push @{ $sc->{notes} }, "round $r: responses ended after the gate of their last event (median/max s): " . join(', ',
        map { my @t = sort { $a <=> $b } @{ $ends{$_} }; sprintf '%s %.2f/%.2f', $_, $t[@t / 2], $t[-1] } sort keys %ends);
}

# ------------------------------------------------------------ Redis gone at the end

# Streams that end while the store cannot be reached at all: a gateway of
# one worker, where nobody follows them; Redis is killed, requests with new
# keys keep its connection failing (each answered 503, nothing forwarded),
# and meanwhile the streams, one after another, outgrow
# idempotency_max_response_size: the capture ends each live log as cut and
# its last append finds the store unreachable at once. The original
# clients get their responses as they are, whole; the worker lives on.
sub redis_gone_at_the_end {
    my $streams = 8;
    my $ng = Idem::Stress::gateway('s11c', workers => 1, locations => "        location /s11c/ { idempotency on; "
        . "idempotency_wait 10s; idempotency_max_response_size 100; proxy_buffering off; proxy_pass http://payments; }\n");
    my ($worker) = Idem::Nginx::workers_of($ng->{pid});
    my @keys;
    for my $i (1 .. $streams) {
        my $k = { i => $i, pad => 40, events => 2, path => "/s11c/k$i", key => "s11c-$i" };
        $k->{uri} = "$k->{path}?sse=2&gate=s11c$i&pad=40";
        $k->{stream} = event($k, 1) . event($k, 2);
        $k->{ends} = [0, length event($k, 1), length $k->{stream}];
        $k->{c} = { k => $k, role => 'original', s => Idem::Live::post($ng->{port}, $k->{uri}, $k->{key}) };
        push @keys, $k;
    }
    my @clients = map { $_->{c} } @keys;
    my $ok = pump([map { $_->{s} } @clients], STEP_LIMIT, all_reached(\@clients, 1));
    Idem::Stress::check($sc, $ok, 'Redis gone: every original got its first event',
                        'Redis gone: not every original got its first event within ' . STEP_LIMIT . ' s');
    Idem::Redis::stop_redis('KILL');
    # 20 answers, then a gate every 25 answers, then 25 more
    my ($answered, $opened, $n, %answers) = (0, 0, 0);
    my $next = sub {
        my ($p) = @_;
        $n++;
        Idem::HTTP::pool_submit($p, { port => $ng->{port}, method => 'POST', path => "/s11c/other$n", body => 'x',
                                      headers => [['Idempotency-Key', "s11c-other-$n"]], timeout => 10 });
    };
    my $p = Idem::HTTP::pool_new(concurrency => 4, on_done => sub {
        my ($req, $res, $pool) = @_;
        $answered++;
        Idem::Stress::count_answer($sc, $res);
        $answers{ Idem::Stress::answer_label($res) }++;
        if ($opened < $streams && $answered >= 20 + 25 * $opened) {
            $opened++;
            Idem::Live::open_gate("s11c$opened", 2);
        }
        $next->($pool) if $answered < 20 + 25 * $streams && $n < 1000;
    });
    $next->($p) for 1 .. 4;
    Idem::HTTP::pool_run($p, time + 30);
    $ok = pump([map { $_->{s} } @clients], END_LIMIT, sub { !grep { !$_->{s}{eof} } @clients });
    my ($now) = Idem::Nginx::workers_of($ng->{pid});
    Idem::Redis::start_redis();
    my @bad = grep { my $r = finish($_->{c}{s}); !$r->{complete} || $r->{body} ne $_->{stream} } @keys;
    $sc->{requests} += @keys;
    Idem::Nginx::nginx_stop($ng);
    push @{ $sc->{notes} }, "Redis gone at the end: $opened streams ended while requests with new keys got: "
        . Idem::Stress::answers_text(\%answers);
    Idem::Stress::check($sc, ($answers{503} // 0) + ($answers{'503/unavailable'} // 0) == $answered,
                        'Redis gone: every request with a new key answered 503 (the store unreachable)',
                        'Redis gone: requests with new keys got ' . Idem::Stress::answers_text(\%answers));
    Idem::Stress::check($sc, !@bad, 'Redis gone: every original client got its whole response',
                        'Redis gone: ' . scalar(@bad) . " of $streams original clients did not get their whole response");
    Idem::Stress::check($sc, ($now // 0) == $worker, 'Redis gone: the worker lives on',
                        "Redis gone: the worker $worker was replaced by " . ($now // 'none') . ' (it crashed)');
    return $ng;
}

# ------------------------------------------------------------ the rounds

my @ended = (redis_gone_at_the_end());

my %rss;
for my $r (1 .. 3) {
    round($r, redis_restart => $r == 3);
    for my $g (@gws) {
        for my $w (@{ $workers{ $g->{name} } }) { $rss{$r}{$w} = Idem::Proc::vm_rss_kb($w) // 0 }
    }
    Idem::Stress::note("round $r done; worker VmRSS: ", join(', ', map { "$_ $rss{$r}{$_} kB" } sort keys %{ $rss{$r} }));
}

# Worker memory: round 2 as round 1, no more.
my ($after1, $after2) = (0, 0);
$after1 += $_ for values %{ $rss{1} };
$after2 += $_ for values %{ $rss{2} };
my $growth = $after1 ? ($after2 - $after1) / $after1 : 0;
my $after3 = 0;
$after3 += $_ for values %{ $rss{3} };
push @{ $sc->{notes} }, sprintf('worker VmRSS, all 4 workers: %d kB after round 1, %d kB after round 2 (%+.1f%%, limit '
    . '%d%%), %d kB after round 3', $after1, $after2, 100 * $growth, 100 * RSS_GROWTH_MAX, $after3);
if (Idem::Nginx::asan()) {
    push @{ $sc->{notes} }, 'STRESS_ASAN: the VmRSS growth is not checked (ASan keeps freed memory in quarantine)';
} else {
    Idem::Stress::check($sc, $after1 && $growth <= RSS_GROWTH_MAX, 'the workers\' VmRSS did not grow from round 1 to round 2',
                        sprintf('the workers\' VmRSS grew %.1f%% from round 1 to round 2', 100 * $growth));
}

# No worker died: the same workers, none exited abnormally.
for my $g (@gws) {
    my @now = sort { $a <=> $b } Idem::Nginx::workers_of($g->{pid});
    Idem::Stress::check($sc, "@now" eq "@{ $workers{ $g->{name} } }", "nginx $g->{name}: the same workers throughout",
                        "nginx $g->{name}: workers @{ $workers{ $g->{name} } } at the start, @now at the end");
}
Idem::Nginx::nginx_stop($_) for @gws, @ended;
for my $g (@gws, @ended) {
    open my $fh, '<', $g->{error_log} or next;
    my @died = grep { /exited on signal|exited with code [1-9]|core dumped/ } <$fh>;
    chomp @died;
    Idem::Stress::check($sc, !@died, "nginx $g->{name}: no worker exited abnormally",
                        "nginx $g->{name}: " . scalar(@died) . ' worker exits: ' . join('; ', @died[0 .. ($#died < 2 ? $#died : 2)]));
}
Idem::Stress::report_log($sc, $_) for @gws, @ended;
my $took = time - $sc->{start};
Idem::Stress::check($sc, $took <= TIME_LIMIT, 'the scenario took at most ' . TIME_LIMIT . ' s',
                    sprintf('the scenario took %.0f s, more than %d s', $took, TIME_LIMIT));
Idem::Stress::scenario_end($sc);

done_testing();
