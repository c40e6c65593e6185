# Scenario 4: a binary upgrade under load (800 keys, STRESS_SCALE scales
# them, at least 100; upstream sleep=0.2, idempotency_lock_ttl 5s): USR2,
# WINCH, QUIT. No crash, no duplicate, no stuck claim (every key replays
# within idempotency_lock_ttl).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::Nginx;
use Idem::Proc;
use Idem::Stress;
use Idem::Upstream;

my $KEYS = Idem::Stress::scaled(800, 100);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(4, "binary upgrade under load ($KEYS keys, upstream sleep=0.2, "
                                         . 'idempotency_lock_ttl 5s): USR2, WINCH, QUIT');
my $ng = Idem::Stress::gateway('s4', workers => 2);
my @keys = map { { path => "/s4/k$_", key => "s4-key-$_", body => "{\"order\":$_}", query => '?sleep=0.2' } }
    1 .. $KEYS;
my ($phase, $phase_at, $old, $new) = (0, 0, $ng->{pid}, undef);
my (%stuck, @events);    # %stuck: a step that did not come, by step
my $t_start = time;
my $ev = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); Idem::Stress::note($events[-1]) };
my $on_tick = sub {
    my ($p) = @_;
    my $now = time;
    if ($phase == 0 && $p->{completed} >= 0.25 * $KEYS) {
        kill 'USR2', $old;
        $ev->("USR2 to master $old (after $p->{completed} answers, $p->{nactive} in flight)");
        ($phase, $phase_at) = (1, $now);
    } elsif ($phase == 1) {
        my $pid;
        if (-e "$ng->{pid_file}.oldbin" && open my $fh, '<', $ng->{pid_file}) {
            ($pid) = (<$fh> // '') =~ /(\d+)/;
        }
        if ($pid && $pid != $old && Idem::Proc::running($pid) && Idem::Nginx::workers_of($pid) >= 2) {
            $new = $pid;
            Idem::Proc::adopt($new);
            $ng->{pid} = $new;
            $ng->{old_pid} = $old;
            $ev->("new master $new up with workers " . join(' ', Idem::Nginx::workers_of($new))
                  . "; WINCH to old master $old");
            kill 'WINCH', $old;
            ($phase, $phase_at) = (2, $now);
        } elsif ($now - $phase_at > 15) {
            ($stuck{usr2}, $phase) = ('no new master with workers within 15 s of USR2', 9);
        }
    } elsif ($phase == 2) {
        my @old_workers = Idem::Nginx::workers_of($old);
        if (!@old_workers) {
            $ev->("old workers gone; QUIT to old master $old");
            kill 'QUIT', $old;
            ($phase, $phase_at) = (3, $now);
        } elsif ($now - $phase_at > 20) {
            ($stuck{winch}, $phase) = ("old workers (@old_workers) still running 20 s after WINCH", 9);
        }
    } elsif ($phase == 3) {
        if (!Idem::Proc::running($old)) {
            $ev->("old master $old exited");
            Idem::Proc::forget($old);
            $phase = 4;
        } elsif ($now - $phase_at > 15) {
            ($stuck{quit}, $phase) = ("old master $old still running 15 s after QUIT", 9);
        }
    }
    return $phase > 0 && $phase < 4;
};
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                                  max_attempts => 60, key_time => 60, time_limit => 90);
Idem::Stress::check($sc, $st->{completed}, 'the load finished in time', 'the load did not finish in time');
Idem::Stress::check($sc, !$stuck{usr2}, 'a new master with its workers within 15 s of USR2', $stuck{usr2});
Idem::Stress::check($sc, !$stuck{winch}, 'the old workers gone within 20 s of WINCH', $stuck{winch});
Idem::Stress::check($sc, !$stuck{quit}, 'the old master gone within 15 s of QUIT', $stuck{quit});
Idem::Stress::check($sc, $phase == 4, 'the upgrade completed during the load', "the upgrade did not complete (phase $phase)");
Idem::Stress::note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
                   $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
my @gave_up = grep { !$_->{final} || ($_->{final}{status} // 0) !~ /^2/ } @keys;
Idem::Stress::check($sc, !@gave_up, 'every key got a 2xx', scalar(@gave_up) . ' keys never got a 2xx');
Idem::Stress::check($sc, $new && Idem::Proc::running($new), 'the new master runs', 'the new master is not running');
Idem::Stress::tally_executions($sc, \@keys);
my $logged = Idem::Upstream::upstream_log_executions('/s4/');
Idem::Stress::check($sc, $logged == $sc->{executions}, 'the upstream log agrees with its counts',
                    "upstream log shows $logged executions, /_count says $sc->{executions}");

# No stuck claim: every key's retry gets a 2xx replay within lock_ttl (5s).
my $t = time;
my $before = $sc->{executions};
my ($tally, $not, $differ) = Idem::Stress::replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
my $after = 0;
$after += $_ for values %$counts;
my ($slowest) = sort { $b <=> $a } map { $_->{replay} ? $_->{replay}{done_at} - $t : 99 } @keys;
push @{ $sc->{notes} }, sprintf('stuck-claim check: %s; last replay %.2f s after the load',
    join(', ', map { "$_: $tally->{$_}" } sort keys %$tally), $slowest // 0);
if ($after != $before) {
    $sc->{duplicates} += $after - $before;
    $sc->{executions} = $after;
}
Idem::Stress::check($sc, $after == $before, 'the stuck-claim check executed nothing',
                    'the stuck-claim check executed ' . ($after - $before) . ' keys again');
Idem::Stress::check($sc, !@$not, 'every key replays within idempotency_lock_ttl (no stuck claim)',
                    scalar(@$not) . ' keys did not get a 2xx replay within idempotency_lock_ttl (stuck claim?)');
Idem::Stress::check($sc, !@$differ, 'every replay is the body the client first got',
                    scalar(@$differ) . ' replays differ from the body the client first got');
push @{ $sc->{notes} }, @events;
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

done_testing();
