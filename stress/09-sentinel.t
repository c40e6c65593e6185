# Scenario 9: 2000 keys (STRESS_SCALE scales them, at least 200), clients
# retry until 2xx, through Redis Sentinel (a master, a replica, one
# sentinel) while the master fails over (writes paused on it, SENTINEL
# FAILOVER): one execution per key; every key replays.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::Nginx;
use Idem::Redis;
use Idem::RedisSentinel;
use Idem::Stress;

my $KEYS = Idem::Stress::scaled(2000, 200);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(9, "$KEYS keys through Redis Sentinel while the master fails over to its replica");
my ($sentinel, $master, $replica) = Idem::RedisSentinel::start_redis_sentinel(name => 's9');
Idem::Stress::note("master $master, replica $replica, sentinel $sentinel");
my $ng = Idem::Stress::gateway('s9', workers => 2,
                               locations => "        location /s9/ { idempotency on; idempotency_redis_sentinel s9 "
                                          . "127.0.0.1:$sentinel; proxy_pass http://payments; }\n");
my @keys = map { { path => "/s9/k$_", key => "s9-key-$_", body => "{\"order\":$_}",
                   query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $KEYS;
my (@events, @problems);
my ($failover_at, $switched);
my $t_start = time;
my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); Idem::Stress::note($events[-1]) };
my $on_tick = sub {
    my ($p) = @_;
    my $now = time;
    if (!$failover_at && $p->{completed} >= 0.2 * $KEYS) {
        # Writes pause on the old master first, so that nothing it
        # acknowledges is lost when the replica takes over (a forced
        # failover without it may lose the last writes: Redis losing
        # data, outside the module's guarantee).
        # SENTINEL FAILOVER is asked again while the sentinel answers
        # NOGOODSLAVE or INPROG (up to 30 s; the pause ends after 5 s).
        eval {
            Idem::Redis::redis_command_at($master, 'CLIENT', 'PAUSE', 5000, 'WRITE');
            Idem::RedisSentinel::sentinel_failover($sentinel, 's9');
            1;
        } or push @problems, "the failover could not begin: $@";
        $failover_at = $now;
        $event->("CLIENT PAUSE WRITE on $master and SENTINEL FAILOVER after $p->{completed} answers");
    }
    if ($failover_at && !$switched) {
        if ((Idem::RedisSentinel::sentinel_master_port('s9', $sentinel) // 0) == $replica) {
            $switched = 1;
            $event->(sprintf 'the sentinel names %d master, %.2f s after the failover began', $replica, $now - $failover_at);
        } elsif ($now - $failover_at > 30) {
            push @problems, 'the sentinel did not promote the replica within 30 s ('
                          . Idem::RedisSentinel::sentinel_view($sentinel, 's9') . ')';
            $switched = 1;
        }
    }
    return !$switched;
};
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                                  max_attempts => 100, key_time => 90, time_limit => 120);
Idem::Stress::check($sc, $st->{completed}, 'the load finished in time', 'the load did not finish in time');
Idem::Stress::check($sc, $switched, 'the failover ran during the load', 'the load finished before the failover did');
Idem::Stress::check($sc, !@problems, 'the sentinel promoted the replica', join('; ', @problems));
Idem::Stress::note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
                   $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
Idem::Stress::tally_executions($sc, \@keys);
my ($tally, $not, $differ) = Idem::Stress::replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
Idem::Stress::check($sc, !@$not, 'every key replays', scalar(@$not) . ' keys did not replay');
Idem::Stress::check($sc, !@$differ, 'every replay is the first answer', scalar(@$differ) . ' replays differ from the first answer');
push @{ $sc->{notes} }, @events;
push @{ $sc->{notes} }, 'replays: ' . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

done_testing();
