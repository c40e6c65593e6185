# Scenario 12: a full Redis converges. 600 keys (STRESS_SCALE scales them,
# at least 120) of 20 kB responses from an upstream that takes 3 s, sent by
# 128 clients that retry until a final answer. 1.5 s in, Redis
# (maxmemory, noeviction) is filled with the scenario's own keys, kept
# full for 25 s — longer than any store's retry window (idempotency_lock_ttl
# 2s: 20 s) — while the requests keep coming (503: their claims are refused
# too), and then freed. The stores Redis refused are kept, their claims for
# idempotency_ttl; the responses within each worker's
# idempotency_redis_oom_buffer (200k) are held, the others replaced by the
# unreplayable marker. Printed: how many were kept, held and marked, the
# workers' memory, the scripts Redis was sent a second while full, and the
# time from the free to every kept key's final answer in Redis. Asserted:
# every kept key has its final answer (the response, or the marker) within
# 5 s of the free and a retry gets it (the replay, or 410), no key executed
# twice, every key answered, no worker held more than its buffer (the error
# log's accounts).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use IdempotencyTest ();    # redis_key only: starts nothing
use Idem::Nginx;
use Idem::Redis;
use Idem::Stress;
use Idem::Upstream;

my $KEYS = Idem::Stress::scaled(600, 120);
my $FULL_FOR = 25;     # seconds Redis stays full: past every store's retry window
my $BOUND = 5;         # seconds from the free to every kept key's final answer
my $BUFFER = 200 * 1024;

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(12, "$KEYS keys of 20 kB, clients retry, while Redis is full for $FULL_FOR s, "
                                          . 'then freed: every refused store converges');
my $ng = Idem::Stress::gateway('s12', workers => 2, http => "    idempotency_redis_oom_buffer 200k;\n",
    locations => "        location /s12/ { idempotency on; idempotency_lock_ttl 2s; idempotency_compress off; "
               . "proxy_pass http://payments; }\n");
my @keys = map { { path => "/s12/k$_", key => "s12-key-$_", body => "{\"order\":$_}",
                   query => '?sleep=3&size=20000' } } 1 .. $KEYS;
$_->{rkey} = IdempotencyTest::redis_key($_->{key}, '', 'idem:', '') for @keys;

# Each key's kind (module/record.hpp: 1 claim, 2 response, 3 marker; 0
# none) and PTTL, in one step.
my $LOOK = "local r = {} for i, k in ipairs(KEYS) do local v = redis.call('GET', k) "
         . "r[2 * i - 1] = v and string.byte(v, 5) or 0 r[2 * i] = redis.call('PTTL', k) end return r";
sub look {
    my (@ks) = @_;
    my %out;
    for (my $i = 0; $i < @ks; $i += 200) {
        my @part = @ks[$i .. ($i + 199 < $#ks ? $i + 199 : $#ks)];
        my $r = Idem::Redis::redis_command('EVAL', $LOOK, scalar(@part), map { $_->{rkey} } @part);
        $out{ $part[$_]{key} } = [ $r->[2 * $_], $r->[2 * $_ + 1] ] for 0 .. $#part;
    }
    return \%out;
}

sub used_memory { (Idem::Redis::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/)[0] }

# Scripts Redis was sent so far (EVAL and EVALSHA: the stores, renewals and
# releases; the claims are SETs).
sub scripts_sent {
    my ($n, $stats) = (0, Idem::Redis::redis_command('INFO', 'commandstats'));
    $n += $1 + ($2 // 0) while $stats =~ /^cmdstat_eval(?:sha)?:calls=(\d+)(?:.*?rejected_calls=(\d+))?/mg;
    return $n;
}

# The workers' resident memory in kB, summed.
sub workers_rss {
    my $kb = 0;
    for my $pid (Idem::Nginx::workers_of($ng->{pid})) {
        open my $fh, '<', "/proc/$pid/status" or next;
        while (<$fh>) { $kb += $1 if /^VmRSS:\s+(\d+)/ }
    }
    return $kb;
}

# Fills Redis with filler keys of 10 kB, ten a step (a script: quick, so
# that the requests in flight meet a full Redis), until it refuses (OOM),
# and keeps it full; returns how many it wrote.
my $FILL = "for i = tonumber(ARGV[1]), tonumber(ARGV[1]) + 9 do redis.call('SET', 's12-filler:' .. i, ARGV[2]) end";
sub fill {
    Idem::Redis::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    Idem::Redis::redis_command('CONFIG', 'SET', 'maxmemory', used_memory() + 4_000_000);
    my ($value, $n) = ('f' x 10_000, 0);
    while ($n < 5000) {
        my $ok = eval { Idem::Redis::redis_command('EVAL', $FILL, 0, $n + 1, $value); 1 };
        if (!$ok) {
            die "fill: $@" unless $@ =~ /OOM/;
            last;
        }
        $n += 10;
    }
    # the filler's own connections, freed as they close, must not leave room
    Idem::Redis::redis_command('CONFIG', 'SET', 'maxmemory', used_memory() - 65_536);
    return $n;
}

my ($phase, $t_fill, $t_free, $filler, $rss_full, $rss_before, $scripts_at_fill, $scripts_while_full) = (0) x 8;
my (@kept, %final, $last_look);
my $t_start = time;
my $on_tick = sub {
    my ($p) = @_;
    my $now = time;
    # half way through the upstream's 3 s of the first requests: those in flight meet a full Redis
    if ($phase == 0 && $now - $t_start >= 1.5) {
        $rss_before = workers_rss();
        $filler = fill();
        $t_fill = time;
        Idem::Stress::note(sprintf 'Redis full after %d answers: %d filler keys of 10 kB, maxmemory %d',
                           $p->{completed}, $filler, Idem::Redis::redis_command('CONFIG', 'GET', 'maxmemory')->[1]);
        $phase = 1;
    } elsif ($phase == 1 && !$scripts_at_fill && $now - $t_fill >= 5) {
        $scripts_at_fill = scripts_sent();   # the requests in flight at the fill have ended by now
    } elsif ($phase == 1 && $now - $t_fill >= $FULL_FOR) {
        my $kinds = look(@keys);
        # a claim kept for idempotency_ttl (24 h), not one renewed for lock_ttl
        @kept = grep { $kinds->{ $_->{key} }[0] == 1 && $kinds->{ $_->{key} }[1] > 60_000 } @keys;
        $rss_full = workers_rss();
        $scripts_while_full = scripts_sent() - $scripts_at_fill;
        for (my $i = 1; $i <= $filler; $i += 500) {
            Idem::Redis::redis_command('DEL', map { "s12-filler:$_" } $i .. ($i + 499 < $filler ? $i + 499 : $filler));
        }
        Idem::Redis::redis_command('CONFIG', 'SET', 'maxmemory', 0);   # room for the rest of the load
        $t_free = time;
        Idem::Stress::note(sprintf 'Redis freed after %.1f s full: %d kept claims at the free', $t_free - $t_fill,
                           scalar @kept);
        $phase = 2;
    } elsif ($phase == 2 && $now - ($last_look // 0) >= 0.05) {
        $last_look = $now;
        my @pending = grep { !$final{ $_->{key} } } @kept;
        my $kinds = look(@pending);
        for my $k (@pending) {
            my $kind = $kinds->{ $k->{key} }[0];
            $final{ $k->{key} } = [ $kind, time - $t_free ] if $kind != 1;
        }
        $phase = 3 if !grep { !$final{ $_->{key} } } @kept or time - $t_free > 30;
    }
    return $phase > 0 && $phase < 3;
};
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                                  concurrency => 128, max_attempts => 400, key_time => 150, time_limit => 200);
Idem::Stress::check($sc, $st->{completed}, 'the load finished in time', 'the load did not finish in time');
Idem::Stress::check($sc, $phase == 3, 'Redis was filled, kept full and freed during the load',
                    "only phase $phase of 3 was reached (the load finished first)");
Idem::Stress::note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
                   $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
Idem::Stress::check($sc, @kept > 0, scalar(@kept) . ' stores were refused for memory and kept',
                    'no store was refused for memory: the fill came too late or too early');

# The figure: from the free to every kept key's final answer in Redis.
my @late = grep { !$final{ $_->{key} } || $final{ $_->{key} }[1] > $BOUND } @kept;
my @times = sort { $a <=> $b } map { $final{ $_->{key} }[1] } grep { $final{ $_->{key} } } @kept;
my %by_kind;
$by_kind{ { 2 => 'response', 3 => 'marker', 0 => 'gone' }->{ $final{ $_->{key} }[0] } // 'other' }++
    for grep { $final{ $_->{key} } } @kept;
my $figure = @times ? sprintf('from the free to the final answer of the %d kept keys: median %.2f s, the last %.2f s (%s)',
                              scalar @times, $times[$#times / 2], $times[-1],
                              join(', ', map { "$_ $by_kind{$_}" } sort keys %by_kind))
                    : 'no kept key reached its final answer';
Idem::Stress::note($figure);
push @{ $sc->{notes} }, $figure;
Idem::Stress::check($sc, !@late, "every kept key had its final answer within $BOUND s of the free",
                    scalar(@late) . " kept keys had none within $BOUND s of the free");
Idem::Stress::tally_executions($sc, \@keys);
my @unanswered = grep { !$_->{final} || ($_->{final}{status} // 0) !~ /^(?:2\d\d|410)$/ } @keys;
Idem::Stress::check($sc, !@unanswered, 'every key got a final answer (2xx or 410)',
                    scalar(@unanswered) . ' keys never got one (bounded retries)');
Idem::Stress::note("  $_->{path}: @{ $_->{answers} // [] }") for @unanswered[0 .. ($#unanswered < 4 ? $#unanswered : 4)];

# A retry of every kept key now: the replay, or 410 where the marker is.
my $before = $sc->{executions};
my ($tally, $not) = Idem::Stress::replay_check(sc => $sc, keys => \@kept, port => $ng->{port}, within => 0);
push @{ $sc->{notes} }, 'a retry of each kept key: ' . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
my @wrong = grep {
    my $want = ($final{ $_->{key} }[0] // 0) == 3 ? 410 : 201;
    ($_->{replay}{status} // 0) != $want
} @kept;
Idem::Stress::check($sc, !@wrong, 'a retry of each kept key gets the replay, or 410 for a marker',
                    scalar(@wrong) . ' kept keys answered otherwise');
my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
my $after = 0;
$after += $_ for values %$counts;
Idem::Stress::check($sc, $after == $before, 'the retries executed nothing', ($after - $before) . ' executed again');

my $oom = Idem::Stress::metrics_value($ng->{port}, 'idempotency_redis_stores_out_of_memory_total') // 0;
my $marked = Idem::Stress::metrics_value($ng->{port}, 'idempotency_redis_oom_markers_total') // 0;
push @{ $sc->{notes} }, sprintf('stores refused for memory: %d (%d held, %d replaced by the marker); '
    . 'workers\' RSS %d kB before the fill, %d kB while full', $oom, $oom - $marked, $marked, $rss_before, $rss_full);
push @{ $sc->{notes} }, sprintf('while Redis was full (its last %d s): %.1f scripts a second sent to it by the two '
    . 'workers (the kept stores\' attempts and renewals)', $FULL_FOR - 5, $scripts_while_full / ($FULL_FOR - 5));
Idem::Nginx::nginx_stop($ng);
my (undef, $errors) = Idem::Stress::report_log($sc, $ng);
# Each refusal of a held response logs the worker's account: never beyond the buffer.
my ($most, $over) = (0, 0);
if (open my $fh, '<', $ng->{error_log}) {
    while (<$fh>) {
        next unless /; (\d+) of the worker's idempotency_redis_oom_buffer of (\d+)\)/;
        $most = $1 if $1 > $most;
        $over++ if $1 > $2 || $2 != $BUFFER;
    }
}
push @{ $sc->{notes} }, "the most a worker held for kept stores: $most bytes of its $BUFFER";
Idem::Stress::check($sc, !$over && $most <= $BUFFER, 'no worker held more than idempotency_redis_oom_buffer',
                    "$over refusals were held beyond the buffer");
Idem::Stress::check($sc, $marked > 0, 'responses beyond the buffer were replaced by the marker',
                    'no response went beyond the buffer (too few were kept)');
Idem::Stress::scenario_end($sc);

done_testing();
