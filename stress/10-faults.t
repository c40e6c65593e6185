# Scenario 10: 1500 keys (STRESS_SCALE scales them, at least 150), each
# POSTed once and retried once idempotency_lock_ttl (4s) + 1 s after its
# answer, concurrency 16, while a fault proxy between nginx and Redis drops
# replies, stalls them past idempotency_redis_timeout (300ms) or cuts the
# connection mid-reply, and nginx is reloaded (SIGHUP) 5 times during the
# faults (worker_shutdown_timeout 5s; the old workers must be gone within it
# + 3 s). No worker crash or alert; at most one execution per key; a first
# attempt gets its execution or 503, a retry a replay, 409, 410, 503 or the
# key's first execution; once every claim has expired or been resolved in
# Redis, each key once more: the same.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::FaultProxy;
use Idem::HTTP;
use Idem::Nginx;
use Idem::Proc;
use Idem::Redis;
use Idem::Stress;
use Idem::Upstream;
use Idem::Wait;

use constant {
    REDIS_TIMEOUT => 300,   # ms, idempotency_redis_timeout
    LOCK_TTL      => 4,     # s, idempotency_lock_ttl
    SHUTDOWN      => 5,     # s, worker_shutdown_timeout
    STALL         => 800,   # ms a stalled reply is held
    FAULT_AFTER   => 1.2,   # s a fault goes on after the SIGHUP
    CONCURRENCY   => 16,
    LOAD_LIMIT    => 120,   # s for the load and the reloads
    TIME_LIMIT    => 180,   # s for the whole scenario
};

my $KEYS = Idem::Stress::scaled(1500, 150);

Idem::Stress::setup();

# What the module keeps under $prefix in Redis: claims, responses,
# unreplayable marks and other values (the kind byte after "IDM\x01").
sub redis_kinds {
    my ($prefix) = @_;
    my $lua = q{
        local n = {0, 0, 0, 0}
        local cursor = '0'
        repeat
            local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
            cursor = r[1]
            for _, k in ipairs(r[2]) do
                local v = redis.call('GET', k)
                local kind = v and string.byte(v, 5) or 0
                if kind >= 1 and kind <= 3 then n[kind] = n[kind] + 1 else n[4] = n[4] + 1 end
            end
        until cursor == '0'
        return table.concat(n, ' ')
    };
    my @n = split ' ', Idem::Redis::redis_command('EVAL', $lua, 0, "$prefix*");
    return { claim => $n[0], response => $n[1], unreplayable => $n[2], other => $n[3] };
}

# one reload per fault, in this order
my @faults = (['drop'], ['stall', STALL], ['cut'], ['drop'], ['stall', STALL]);
my $sc = Idem::Stress::scenario_begin(10, "$KEYS keys and a retry of each through a proxy that drops, stalls and cuts "
    . "Redis's replies; nginx reloaded " . @faults . ' times during the faults (idempotency_redis_timeout '
    . REDIS_TIMEOUT . 'ms, idempotency_lock_ttl ' . LOCK_TTL . 's, worker_shutdown_timeout '
    . SHUTDOWN . 's)');
my $px = Idem::FaultProxy::fault_proxy_start(Idem::Redis::redis_port());
Idem::Stress::note("fault proxy pid $px->{pid} on 127.0.0.1:$px->{port}, to Redis on @{[ Idem::Redis::redis_port() ]}");
my $prefix = 'idem-s10:';
my $ng = Idem::Stress::gateway('s10', workers => 2, main => 'worker_shutdown_timeout ' . SHUTDOWN . 's;',
    locations => "        location /s10/ { idempotency on; idempotency_redis 127.0.0.1:$px->{port}; "
               . 'idempotency_redis_timeout ' . REDIS_TIMEOUT . 'ms; idempotency_lock_ttl '
               . LOCK_TTL . "s; idempotency_key_prefix $prefix; proxy_pass http://payments; }\n");
my $master = $ng->{pid};
# a fifth of the keys keep the upstream long enough for their response
# to come back while the Redis connection is down or the worker exiting
my @keys = map { { path => "/s10/k$_", key => "s10-key-$_", body => "{\"order\":$_}",
                   query => '?sleep=' . ($_ % 10 == 0 ? 0.8 : $_ % 10 == 5 ? 0.4 : 0.02) } } 1 .. $KEYS;
my $request = sub {
    my ($k, $kind) = @_;
    return { port => $ng->{port}, method => 'POST', path => $k->{path} . $k->{query}, timeout => 10,
             close => 1, k => $k, kind => $kind, body => $k->{body},
             headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] };
};

# The load: each key once, and once more idempotency_lock_ttl + 1 s
# after its answer (a claim its first attempt left behind has expired
# by then). Fault i begins once i/(faults + 1) of the keys were sent;
# from then on a third as many more are sent until its old workers are
# gone and Redis answers through nginx again (probes, keys of their
# own, one at a time 25 ms apart, until 3 in a row are executed), so
# that every fault and reload meets the load and most keys are sent
# between them.
my $t_start = time;
my @events;
my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); Idem::Stress::note($events[-1]) };
my $gate = sub { int(($_[0] + 1) * @keys / (@faults + 1)) };
my $fault_keys = int(@keys / (@faults + 1) / 3);
my ($sent, $cycle, $state, $base, $t_fault, $t_hup, $next_poll, $sent_at_fault, @old) = (0, 0, 'pass', undef, 0, 0, 0, 0);
my ($probes, $probing, $probe_ok, $t_pass) = (0, 0, 0, 0);
my (@exit_times, @recovery_times, @unexpected, @reload_problems, @exit_problems, @recovery_problems);
my $p = Idem::HTTP::pool_new(
    concurrency => CONCURRENCY,
    on_done => sub {
        my ($req, $res, $pool) = @_;
        my $k = $req->{k};
        Idem::Stress::count_answer($sc, $res);
        if ($req->{kind} eq 'probe') {
            $probing = 0;
            $probe_ok = !$res->{error} && $res->{status} =~ /^2/ ? $probe_ok + 1 : 0;
            return;
        }
        $k->{ $req->{kind} } = $res;
        # when it was answered: fault (before the SIGHUP), reloading, reloaded
        # (new workers up, fault still on), draining (fault off), or between
        $k->{"$req->{kind}_at"} = $state ne 'pass' ? 'reload ' . ($cycle + 1) . ", $state"
                                : $cycle < @faults ? 'before reload ' . ($cycle + 1) : 'after the reloads';
        Idem::HTTP::pool_submit($pool, $request->($k, 'retry'), LOCK_TTL + 1) if $req->{kind} eq 'first';
    },
    on_tick => sub {
        my ($pool) = @_;
        my $limit = $cycle >= @faults ? @keys : $state eq 'pass' ? $gate->($cycle)
                  : $sent_at_fault + $fault_keys;
        $limit = @keys if $limit > @keys;
        while ($sent < $limit && @{ $pool->{ready} } < $pool->{conc}) {
            Idem::HTTP::pool_submit($pool, $request->($keys[ $sent++ ], 'first'));
        }
        return 0 if $cycle >= @faults && $sent >= @keys;
        my $now = time;
        if ($cycle >= @faults) {
            # every fault ran; the rest of the keys are being sent
        } elsif ($state eq 'pass' && $sent >= $gate->($cycle)) {
            my ($mode, $arg) = @{ $faults[$cycle] };
            Idem::FaultProxy::fault_proxy_mode($px, $mode, $arg);
            $base = Idem::FaultProxy::fault_proxy_stats($px);
            ($state, $t_fault, $sent_at_fault) = ('fault', $now, $sent);
            $event->("fault $mode" . ($arg ? " ${arg}ms" : '') . " begins after $sent keys were sent");
        } elsif ($state eq 'fault' && $now >= $next_poll) {
            # SIGHUP once the fault has hit a few replies (old workers
            # then exit with commands unanswered), or after 2 s anyway
            $next_poll = $now + 0.02;
            my $st = Idem::FaultProxy::fault_proxy_stats($px);
            my $hit = $st->{faults} - $base->{faults};
            if ($hit >= 3 || $now - $t_fault > 2) {
                @old = Idem::Nginx::workers_of($master);
                kill 'HUP', $master;
                ($state, $t_hup) = ('reloading', $now);
                $event->(sprintf 'SIGHUP to master %d (old workers %s), %d replies hit by the fault, %d requests in flight',
                                 $master, "@old", $hit, $pool->{nactive});
            }
        } elsif ($state eq 'reloading') {
            my %was = map { $_ => 1 } @old;
            my @new = grep { !$was{$_} } Idem::Nginx::workers_of($master);
            if (@new >= 2) {
                $event->(sprintf 'new workers %s up, %.2f s after SIGHUP', "@new", $now - $t_hup);
                $state = 'reloaded';
            } elsif ($now - $t_hup > 15) {
                push @reload_problems, 'no new workers 15 s after SIGHUP ' . ($cycle + 1);
                $state = 'reloaded';
            }
        }
        if ($state eq 'reloaded' || $state eq 'draining') {
            if (!defined $exit_times[$cycle] && !grep { Idem::Proc::running($_) } @old) {
                $exit_times[$cycle] = $now - $t_hup;
                $event->(sprintf 'old workers %s gone, %.2f s after SIGHUP', "@old", $now - $t_hup);
            }
        }
        if ($state eq 'reloaded' && $now - $t_hup >= FAULT_AFTER) {
            Idem::FaultProxy::fault_proxy_mode($px, 'pass');
            my $st = Idem::FaultProxy::fault_proxy_stats($px);
            $event->(sprintf 'fault %s ends: %d replies dropped, %d stalled, %d connections cut during it',
                             $faults[$cycle][0], map { $st->{$_} - $base->{$_} } qw(dropped stalled cut));
            ($state, $t_pass, $probe_ok) = ('draining', $now, 0);
        } elsif ($state eq 'draining') {
            # old workers gone (or given up on) and Redis reachable again
            if (!defined $exit_times[$cycle] && $now - $t_hup > SHUTDOWN + 3) {
                my @left = grep { Idem::Proc::running($_) } @old;
                push @exit_problems, "old workers @left still running " . (SHUTDOWN + 3) . ' s after SIGHUP ' . ($cycle + 1)
                                     . ' (worker_shutdown_timeout ' . SHUTDOWN . 's)';
                $exit_times[$cycle] = -1;
            }
            if ($probe_ok < 3 && !$probing) {
                if ($now - $t_pass > 10) {
                    push @recovery_problems, 'Redis did not answer through nginx within 10 s of the end of fault ' . ($cycle + 1);
                    $probe_ok = 3;
                    $recovery_times[$cycle] = -1;
                } else {
                    $probing = 1;
                    $probes++;
                    Idem::HTTP::pool_submit($pool, $request->({ path => "/s10/probe/$probes", query => '?sleep=0.02',
                                                    key => "s10-probe-$probes", body => '{}' }, 'probe'),
                                $probes > 1 ? 0.025 : 0);
                }
            }
            $recovery_times[$cycle] //= $now - $t_pass if $probe_ok >= 3;
            ($state, $cycle) = ('pass', $cycle + 1) if defined $exit_times[$cycle] && $probe_ok >= 3;
        }
        return 1;
    },
);
my $completed = Idem::HTTP::pool_run($p, time + LOAD_LIMIT);
Idem::FaultProxy::fault_proxy_mode($px, 'pass');
my $pst = Idem::FaultProxy::fault_proxy_stats($px);
Idem::Stress::check($sc, $completed, 'the load finished within ' . LOAD_LIMIT . ' s',
                    'the load did not finish within ' . LOAD_LIMIT . ' s');
Idem::Stress::check($sc, $cycle >= @faults, 'every fault and reload ran', "only $cycle of " . @faults . ' faults and reloads ran');
Idem::Stress::check($sc, !@reload_problems, 'new workers within 15 s of each SIGHUP', join('; ', @reload_problems));
Idem::Stress::check($sc, !@exit_problems, 'old workers gone within worker_shutdown_timeout + 3 s of each SIGHUP',
                    join('; ', @exit_problems));
Idem::Stress::check($sc, !@recovery_problems, 'Redis answered through nginx within 10 s of the end of each fault',
                    join('; ', @recovery_problems));
Idem::Stress::check($sc, Idem::Proc::running($master), 'the master runs', "the master $master is gone");
Idem::Stress::note(sprintf 'load done in %.1f s: %d first attempts, %d retries', time - $t_start,
     scalar(grep { $_->{first} } @keys), scalar(grep { $_->{retry} } @keys));

# Until every claim has expired (one whose store or release was lost)
# or been resolved: then nothing holds a key any more.
my $t_settle = time;
my $kinds;
Idem::Wait::wait_until(sub { ($kinds = redis_kinds($prefix))->{claim} == 0 }, LOCK_TTL + 3);
push @{ $sc->{notes} }, sprintf('Redis %.2f s after the load: %d claims, %d responses, %d unreplayable, %d other',
    time - $t_settle, @$kinds{qw(claim response unreplayable other)});
Idem::Stress::check($sc, !$kinds->{claim}, 'no claim held once idempotency_lock_ttl has passed',
                    "$kinds->{claim} claims still held " . (LOCK_TTL + 3) . ' s after the load');

# Each key once more: a replay, or the first execution of a key that never ran.
my $before = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
my $fp = Idem::HTTP::pool_new(concurrency => CONCURRENCY, on_done => sub {
    my ($req, $res) = @_;
    Idem::Stress::count_answer($sc, $res);
    $req->{k}{final} = $res;
});
Idem::HTTP::pool_submit($fp, $request->($_, 'final')) for @keys;
Idem::HTTP::pool_run($fp, time + 60);
my $after = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);

# The verdict, key by key.
my $class = sub {
    my ($res, $executed_before) = @_;
    return 'none' unless $res;
    return Idem::Stress::answer_label($res) if $res->{error};
    return 'replay' if $res->{status} =~ /^2/ && ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
    return $executed_before ? 'second execution' : 'first execution' if $res->{status} =~ /^2/;
    return "$res->{status}";
};
my (%tally, @dups, @differ, @slow);
for my $k (@keys) {
    my $n = $after->{ $k->{path} };
    $sc->{executions} += $n;
    if ($n > 1) { $sc->{duplicates} += $n - 1; push @dups, $k }
    my $first = $class->($k->{first}, 0);
    my $retry = $class->($k->{retry}, $n > 1);
    my $final = $class->($k->{final}, $before->{ $k->{path} } > 0);
    $tally{first}{$first}++;
    $tally{retry}{$retry}++;
    $tally{final}{$final}++;
    push @unexpected, "$k->{path}: first attempt $first" unless $first =~ /^(?:first execution|503)$/;
    push @unexpected, "$k->{path}: retry $retry" unless $retry =~ /^(?:replay|409|410|503|first execution)$/;
    push @unexpected, "$k->{path}: final pass $final" unless $final =~ /^(?:replay|409|410|503|first execution)$/;
    push @slow, $k->{first}{elapsed} if $k->{first} && !$k->{first}{error};
    # a replay is the first client's answer
    my ($orig) = grep { $_ && !$_->{error} && $_->{status} =~ /^2/ } map { $k->{$_} } qw(first retry final);
    push @differ, $k if $orig && grep { $_ && $_ != $orig && !$_->{error} && $_->{status} =~ /^2/
                                        && $_->{body} ne $orig->{body} } map { $k->{$_} } qw(retry final);
}
Idem::Stress::check($sc, !@dups, 'no key executed more than once',
                    scalar(@dups) . " keys executed more than once ($sc->{duplicates} duplicate executions)");
if (@dups) {
    for my $k (@dups[0 .. ($#dups < 9 ? $#dups : 9)]) {
        Idem::Stress::note(sprintf '  duplicate: %s: %d executions; first attempt %s (%s), retry %s (%s), final pass %s',
             $k->{path}, $after->{ $k->{path} }, Idem::Stress::answer_label($k->{first} // { error => 'none' }),
             $k->{first_at} // '?', Idem::Stress::answer_label($k->{retry} // { error => 'none' }), $k->{retry_at} // '?',
             Idem::Stress::answer_label($k->{final} // { error => 'none' }));
    }
}
Idem::Stress::check($sc, !@unexpected, 'every answer allowed (first attempt: its execution or 503; retry and final pass: '
                    . 'a replay, 409, 410, 503 or the first execution)', scalar(@unexpected) . ' answers other than allowed');
if (@unexpected) {
    Idem::Stress::note("  $_") for @unexpected[0 .. ($#unexpected < 9 ? $#unexpected : 9)];
}
Idem::Stress::check($sc, !@differ, "every key's 2xx answers carry its first 2xx's body",
                    scalar(@differ) . ' keys answered 2xx with another body than their first 2xx');
my $logged = Idem::Upstream::upstream_log_executions('/s10/k');
Idem::Stress::check($sc, $logged == $sc->{executions}, 'the upstream log agrees with its counts',
                    "upstream log shows $logged executions, /_count says $sc->{executions}");
my @elapsed = sort { $a <=> $b } @slow;
push @{ $sc->{notes} }, "$_: " . Idem::Stress::answers_text($tally{$_}) for qw(first retry final);
push @{ $sc->{notes} }, sprintf('first attempts answered: median %.3f s, slowest %.2f s, %d over 1 s',
    $elapsed[ @elapsed / 2 ] // 0, $elapsed[-1] // 0, scalar grep { $_ > 1 } @elapsed);
push @{ $sc->{notes} }, sprintf('reloads %d; old workers gone %s s after SIGHUP; Redis answered through nginx '
    . '%s s after the end of the fault (%d probes)', scalar @exit_times,
    join(', ', map { ($_ // -1) < 0 ? 'never' : sprintf '%.2f', $_ } @exit_times),
    join(', ', map { ($_ // -1) < 0 ? 'never' : sprintf '%.2f', $_ } @recovery_times), $probes);
push @{ $sc->{notes} }, sprintf('faults injected %d: %d replies dropped, %d stalled %d ms (%d of them delivered late), '
    . '%d connections cut mid-reply; proxy: %d connections, %d commands, %d replies, %d forwarded',
    $pst->{faults}, $pst->{dropped}, $pst->{stalled}, STALL, $pst->{late}, $pst->{cut},
    $pst->{connections}, $pst->{commands}, $pst->{replies}, $pst->{forwarded});
push @{ $sc->{notes} }, @events;
Idem::Nginx::nginx_stop($ng);
Idem::Proc::stop_pid($px->{pid}, 'TERM');
# A worker that exits with a status other than 0 died too (an ASan
# abort, exit(1) from a fatal error): nginx logs that as a notice. Lines
# that are not nginx's own (glibc's "corrupted double-linked list", ...)
# come before a crash.
if (open my $fh, '<', $ng->{error_log}) {
    my @lines = <$fh>;
    chomp @lines;
    my @died = grep { /worker process \d+ exited with code [1-9]/ } @lines;
    Idem::Stress::check($sc, !@died, 'no worker exited with a status other than 0',
                        scalar(@died) . ' worker(s) exited with a status other than 0');
    Idem::Stress::note("  $_") for @died[0 .. ($#died < 9 ? $#died : 9)];
    my %foreign;
    $foreign{$_}++ for grep { !m{^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[} && /\S/ } @lines;
    push @{ $sc->{notes} }, "error log, not from nginx: $foreign{$_} x $_" for sort keys %foreign;
}
my (undef, $errors) = Idem::Stress::report_log($sc, $ng);
my $took = time - $sc->{start};
Idem::Stress::check($sc, $took <= TIME_LIMIT, 'the scenario took at most ' . TIME_LIMIT . ' s',
                    sprintf('the scenario took %.0f s, more than %d s', $took, TIME_LIMIT));
Idem::Stress::scenario_end($sc);

done_testing();
