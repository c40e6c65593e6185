# Scenario 3: 2000 keys (STRESS_SCALE scales them, at least 100), retried
# by clients until 2xx while Redis is paused 2 s (SIGSTOP/SIGCONT), Redis is
# restarted (same port, AOF on) and nginx is reloaded (SIGHUP): one
# execution per key; then every key replays; the metrics outlive the
# reload; the outage does not flood the error log.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::Nginx;
use Idem::Redis;
use Idem::Stress;
use Idem::Upstream;

my $KEYS = Idem::Stress::scaled(2000, 100);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(3, "$KEYS keys, clients retry until 2xx, while Redis is paused 2 s, "
                                         . 'Redis restarts and nginx reloads');
my $ng = Idem::Stress::gateway('s3', workers => 2);
my @keys = map { { path => "/s3/k$_", key => "s3-key-$_", body => "{\"order\":$_}",
                   query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $KEYS;
my @events;
my ($phase, $phase_at, $old_workers, $reloaded) = (0, 0, '', 0);
my $t_start = time;
my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); Idem::Stress::note($events[-1]) };
# The disruptions, each once the load has got so far (answers) and the one
# before has had its effect.
my $on_tick = sub {
    my ($p) = @_;
    my $progress = $p->{completed};     # attempts answered
    my $now = time;
    my $redis_pid = Idem::Redis::redis_pid();
    if ($phase == 0 && $progress >= 0.15 * $KEYS) {
        kill 'STOP', $redis_pid;
        $event->(sprintf 'Redis paused (SIGSTOP pid %d) after %d answers', $redis_pid, $progress);
        ($phase, $phase_at) = (1, $now);
    } elsif ($phase == 1 && $now - $phase_at >= 2) {
        kill 'CONT', $redis_pid;
        $event->(sprintf 'Redis resumed (SIGCONT) after %.2f s', $now - $phase_at);
        ($phase, $phase_at) = (2, $now);
    } elsif ($phase == 2 && $progress >= 0.45 * $KEYS && $now - $phase_at >= 1) {
        my $t = time;
        Idem::Redis::stop_redis();
        Idem::Redis::start_redis();
        $event->(sprintf 'Redis restarted on port %d (pid %d -> %d, down %.2f s, AOF kept)',
                 Idem::Redis::redis_port(), $redis_pid, Idem::Redis::redis_pid(), time - $t);
        ($phase, $phase_at) = (3, time);
    } elsif ($phase == 3 && $progress >= 0.7 * $KEYS && $now - $phase_at >= 1) {
        $old_workers = join ' ', Idem::Nginx::workers_of($ng->{pid});
        kill 'HUP', $ng->{pid};
        $event->(sprintf 'nginx reloaded (SIGHUP master %d; old workers %s)', $ng->{pid}, $old_workers);
        ($phase, $phase_at) = (4, $now);
    } elsif ($phase == 4) {
        my %old = map { $_ => 1 } split ' ', $old_workers;
        my @new = grep { !$old{$_} } Idem::Nginx::workers_of($ng->{pid});
        if (@new >= 2) {
            Idem::Stress::note(sprintf 'nginx reload done: new workers %s (%.2f s)', "@new", $now - $phase_at);
            ($phase, $reloaded) = (5, 1);
        } elsif ($now - $phase_at > 15) {
            $phase = 5;
        }
    }
    return $phase > 0 && $phase < 5;     # keep going until every disruption has run
};
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                                  max_attempts => 60, key_time => 90, time_limit => 120);
Idem::Stress::check($sc, $st->{completed}, 'the load finished in time', 'the load did not finish in time');
Idem::Stress::check($sc, $phase >= 5, 'every disruption ran during the load',
                    "only $phase of 5 disruption phases ran (the load finished first)");
Idem::Stress::check($sc, $reloaded, 'nginx started new workers within 15 s of SIGHUP',
                    'nginx did not start new workers within 15 s of SIGHUP');
Idem::Stress::note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
                   $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
my @gave_up = grep { !$_->{final} || ($_->{final}{status} // 0) !~ /^2/ } @keys;
Idem::Stress::check($sc, !@gave_up, 'every key got a 2xx', scalar(@gave_up) . ' keys never got a 2xx (bounded retries)');
Idem::Stress::note("  $_->{path}: @{ $_->{answers} // [] }") for @gave_up[0 .. ($#gave_up < 4 ? $#gave_up : 4)];
Idem::Stress::tally_executions($sc, \@keys);
my $logged = Idem::Upstream::upstream_log_executions('/s3/');
push @{ $sc->{notes} }, "upstream log: $logged executions of /s3/ (cross-check of /_count)";
Idem::Stress::check($sc, $logged == $sc->{executions}, 'the upstream log agrees with its counts',
                    "upstream log shows $logged executions, /_count says $sc->{executions}");
my $first_exec = grep { $_->{final} && ($_->{final}{headers}{'x-upstream-execution'} // '') ne '1'
                        && ($_->{final}{status} // 0) =~ /^2/ } @keys;
Idem::Stress::check($sc, !$first_exec, "every key's 2xx came from its first execution",
                    "$first_exec keys' 2xx came from an execution other than the first");

# After the storm, every key must replay (nothing executes again).
my $before = $sc->{executions};
my $requests_before = $sc->{requests};
my ($tally, $not, $differ) = Idem::Stress::replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
my $after = 0;
$after += $_ for values %$counts;
push @{ $sc->{notes} }, 'replay pass (' . ($sc->{requests} - $requests_before) . ' requests): '
    . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
if ($after != $before) {
    $sc->{executions} = $after;
    $sc->{duplicates} += $after - $before;
}
Idem::Stress::check($sc, $after == $before, 'the replay pass executed nothing',
                    'the replay pass executed ' . ($after - $before) . ' keys again');
Idem::Stress::check($sc, !@$not, 'every key replays after the storm', scalar(@$not) . ' keys did not replay after the storm');
Idem::Stress::check($sc, !@$differ, 'every replay is the body the client first got',
                    scalar(@$differ) . ' replays differ from the body the client first got');

# The metrics zone outlives the reload: every execution, before and after
# it, is counted once as "new".
my $new = Idem::Stress::metrics_value($ng->{port}, 'idempotency_requests_total{outcome="new"}');
push @{ $sc->{notes} }, 'metrics across the reload: outcome="new" ' . ($new // 'unreadable')
    . " for $sc->{executions} executions";
Idem::Stress::check($sc, defined $new && $new == $sc->{executions}, 'the metrics count every execution across the reload',
                    'the metrics page counts ' . ($new // 'nothing') . " new requests for $sc->{executions} executions "
                    . '(counters lost at the reload?)');
push @{ $sc->{notes} }, @events;
Idem::Nginx::nginx_stop($ng);
my (undef, $errors) = Idem::Stress::report_log($sc, $ng);
# A Redis outage must not flood the log: per-request lines are written at
# most once a second per worker.
my $module_lines = 0;
$module_lines += $errors->{$_} for grep { /idempotency/ } keys %$errors;
my $unavailable = $sc->{answers}{'503/unavailable'} // 0;
push @{ $sc->{notes} }, "error log: $module_lines module lines (error/warn) for $unavailable requests answered 503";
Idem::Stress::check($sc, $module_lines <= 100, 'the outage wrote at most 100 module lines to the error log',
                    "the outage wrote $module_lines module lines to the error log (at most 100 expected)");
my $store_warnings = 0;
$store_warnings += $errors->{$_} for grep { /could not store the response/ } keys %$errors;
push @{ $sc->{notes} }, "$store_warnings warnings 'could not store the response: the claim had expired or was "
    . "taken over', yet every key replays its first answer: no response was lost (a store resent after "
    . 'the reconnect found its first attempt applied)' if $store_warnings && !@$not && !@$differ;
Idem::Stress::scenario_end($sc);

done_testing();
