# Scenario 8: 3000 keys (STRESS_SCALE scales them, at least 300), clients
# retry until 2xx, through a Redis Cluster of 3 masters with a replica each,
# while a master fails over to its replica (CLUSTER FAILOVER) and then, once
# every node agrees that it has, 1000 slots (scaled, at least 100) move
# between the two other masters (redis-cli --cluster reshard; a refused
# reshard runs again for the slots left, 3 runs in 60 s at most): one
# execution per key; then every key replays.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::Nginx;
use Idem::Proc;
use Idem::Redis;
use Idem::RedisCluster;
use Idem::Stress;

use constant {
    SETTLE_TIMEOUT => 30,    # seconds for the cluster to settle (created, failed over)
    RESHARD_TRIES  => 3,     # redis-cli --cluster reshard runs at most, a refused one retried
    RESHARD_TIME   => 60,    # seconds for them all, waits for the cluster to settle included
};

my $KEYS  = Idem::Stress::scaled(3000, 300);
my $SLOTS = Idem::Stress::scaled(1000, 100);

Idem::Stress::setup();
my $tmp = Idem::Stress::tmpdir();
my %problem;    # what went wrong during the load, by check

my $sc = Idem::Stress::scenario_begin(8, "$KEYS keys through a Redis Cluster (3 masters, 3 replicas) while a master "
                           . "fails over and then $SLOTS slots are resharded");
my @ports = Idem::RedisCluster::start_redis_cluster(3, 1, settle => SETTLE_TIMEOUT,
    args => ['--repl-diskless-sync-delay', '0', '--cluster-require-full-coverage', 'yes']);
Idem::Stress::note('cluster nodes on ports ' . join(' ', @ports));
my $seeds = join ' ', map { "127.0.0.1:$_" } @ports[0 .. 2];
my $ng = Idem::Stress::gateway('s8', workers => 2,
                     locations => "        location /s8/ { idempotency on; idempotency_redis_cluster $seeds; "
                                . "proxy_pass http://payments; }\n");
my @keys = map { { path => "/s8/k$_", key => "s8-key-$_", body => "{\"order\":$_}",
                   query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $KEYS;
my @events;
my ($from, $to, $third, $promoted, $to_slots);
my ($failover_at, $took_over, $failed_over, $next_probe, $unsettled);
my ($reshard_pid, $reshard_at, $reshard_first, $reshard_tries, $resharded) = (undef, 0, undef, 0, 0);
my $t_start = time;
my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); Idem::Stress::note($events[-1]) };
# A master fails over to its replica; once every node agrees that it
# has, slots move between the two other masters. redis-cli --cluster
# reshard sends CLUSTER SETSLOT to the masters it found when it started,
# so a master demoted meanwhile would refuse it.
my $on_tick = sub {
    my ($p) = @_;
    my $progress = $p->{completed};
    my $now = time;
    if (!$failover_at && $progress >= 0.1 * $KEYS) {
        my $nodes = Idem::RedisCluster::cluster_nodes($ports[0]);
        ($from, $to, $third) = grep { $nodes->{$_}{master} } sort { $a <=> $b } keys %$nodes;
        ($promoted) = grep { !$nodes->{$_}{master} && $nodes->{$_}{master_id} eq $nodes->{$third}{id} } keys %$nodes;
        $to_slots = $nodes->{$to}{slots};
        eval { Idem::Redis::redis_command_at($promoted, 'CLUSTER', 'FAILOVER'); 1 }
                or $problem{takeover} = "CLUSTER FAILOVER on $promoted: $@";
        $failover_at = $now;
        $event->("CLUSTER FAILOVER on $promoted (the replica of $third) after $progress answers");
    }
    return 0 if !$failover_at || $resharded;
    if (!$failed_over) {
        return 1 if $now < ($next_probe // 0);
        $next_probe = $now + 0.1;
        if (!$took_over && (eval { Idem::Redis::redis_command_at($promoted, 'INFO', 'replication') } // '') =~ /^role:master/m) {
            $took_over = 1;
            $event->(sprintf '%d is master, %.2f s after CLUSTER FAILOVER', $promoted, $now - $failover_at);
        }
        my $why = Idem::RedisCluster::cluster_unsettled(\@ports, $promoted => 'master', $third => $promoted);
        if ($why eq '') {
            $failed_over = 1;
            $event->(sprintf 'every node agrees: %d master, %d its replica, cluster_state:ok; %.2f s after CLUSTER FAILOVER',
                     $promoted, $third, $now - $failover_at);
        } elsif (!$took_over && $now - $failover_at > 20) {
            $problem{takeover} = "the replica $promoted did not take over within 20 s";
            $failed_over = $resharded = 1;
        } elsif ($now - $failover_at > SETTLE_TIMEOUT) {
            $problem{settle} = "the failover did not settle within ${\ SETTLE_TIMEOUT } s: $why";
            $failed_over = $resharded = 1;
        } elsif ($why ne ($unsettled // '')) {
            Idem::Stress::vnote("not settled: $why");
            $unsettled = $why;
        }
        return 1;
    }
    # The reshard: a run that fails is retried, for the slots still to
    # move, once the cluster has settled again; RESHARD_TRIES runs
    # within RESHARD_TIME seconds at most.
    $reshard_first //= $now;
    my $log = "$tmp/reshard.$reshard_tries.log";
    if ($reshard_pid) {
        if (Idem::Proc::running($reshard_pid)) {
            return 1 if $now - $reshard_first <= RESHARD_TIME;
            Idem::Proc::stop_pid($reshard_pid, 'TERM');
            $problem{reshard_time} = "redis-cli --cluster reshard ran past ${\ RESHARD_TIME } s; see $log";
            $resharded = 1;
            return 0;
        }
        my $status = Idem::Proc::exit_status($reshard_pid) // -1;
        my $owned = eval { Idem::RedisCluster::cluster_nodes($to)->{$to}{slots} };
        my $moved = defined $owned ? $owned - $to_slots : '?';
        $reshard_pid = undef;
        if ($status == 0) {
            $resharded = 1;
            $event->(sprintf 'resharding done in %.2f s (%s slots moved)', $now - $reshard_at, $moved);
            $problem{slots} = "$moved slots moved from $from to $to, not $SLOTS" if $moved ne $SLOTS;
            return 0;
        }
        my $err = 'no error message';
        if (open my $lh, '<', $log) {
            while (<$lh>) { $err = $1 if /((?:\[ERR\]|\S+ failed:|ERR ).*\S)/ }
        }
        $err =~ s/\e\[[\d;]*m//g;
        $event->(sprintf 'redis-cli --cluster reshard refused after %.2f s (exit status %s, %s slots moved): %s',
                 $now - $reshard_at, $status, $moved, $err);
        if ($reshard_tries >= RESHARD_TRIES) {
            $problem{refused} = "redis-cli --cluster reshard refused $reshard_tries times; see $log";
            $resharded = 1;
            return 0;
        }
        $next_probe = $now + 0.2 * $reshard_tries;
        $unsettled = undef;
    }
    return 1 if $now < $next_probe;
    $next_probe = $now + 0.1;
    my $why = $reshard_tries ? Idem::RedisCluster::cluster_unsettled(\@ports, $promoted => 'master', $third => $promoted) : '';
    my $nodes = $why eq '' ? eval { Idem::RedisCluster::cluster_nodes($to) } : undef;
    $why = "$to does not answer CLUSTER NODES" if $why eq '' && !$nodes;
    if ($why ne '') {
        if ($now - $reshard_first > RESHARD_TIME) {
            $problem{resettle} = "the cluster did not settle for another reshard within ${\ RESHARD_TIME } s: $why";
            $resharded = 1;
            return 0;
        }
        Idem::Stress::vnote("not settled: $why") if $why ne ($unsettled // '');
        $unsettled = $why;
        return 1;
    }
    my $slots = $SLOTS - ($nodes->{$to}{slots} - $to_slots);
    if ($slots <= 0) {
        $resharded = 1;
        $event->("$SLOTS slots moved from $from to $to");
        return 0;
    }
    $reshard_tries++;
    $log = "$tmp/reshard.$reshard_tries.log";
    $reshard_pid = Idem::Proc::spawn($log, Idem::Redis::find_redis_cli(), '--cluster', 'reshard',
                         "127.0.0.1:$ports[0]", '--cluster-from', $nodes->{$from}{id}, '--cluster-to',
                         $nodes->{$to}{id}, '--cluster-slots', $slots, '--cluster-yes');
    $reshard_at = $now;
    $event->("resharding $slots slots from $from to $to (redis-cli pid $reshard_pid, run $reshard_tries) "
             . "after $progress answers");
    return 1;
};
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                    max_attempts => 60, key_time => 90, time_limit => 120);
Idem::Stress::check($sc, $st->{completed}, 'the load finished in time', 'the load did not finish in time');
Idem::Stress::check($sc, $resharded && $failed_over, 'the failover and the reshard ran during the load',
                    'the load finished before the reshard and the failover did');
Idem::Stress::check($sc, !$problem{takeover}, 'the replica took over within 20 s of CLUSTER FAILOVER', $problem{takeover});
Idem::Stress::check($sc, !$problem{settle}, 'every node agreed on the failover within ' . SETTLE_TIMEOUT . ' s', $problem{settle});
Idem::Stress::check($sc, !$problem{reshard_time}, 'the reshard ran within ' . RESHARD_TIME . ' s', $problem{reshard_time});
Idem::Stress::check($sc, !$problem{refused}, 'the reshard was not refused ' . RESHARD_TRIES . ' times', $problem{refused});
Idem::Stress::check($sc, !$problem{resettle}, 'the cluster settled between reshard runs', $problem{resettle});
Idem::Stress::check($sc, !$problem{slots}, "$SLOTS slots moved", $problem{slots});
Idem::Stress::note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
     $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
Idem::Stress::tally_executions($sc, \@keys);
my ($tally, $not, $differ) = Idem::Stress::replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
Idem::Stress::check($sc, !@$not, 'every key replays', scalar(@$not) . ' keys did not replay');
Idem::Stress::check($sc, !@$differ, 'every replay is the first answer', scalar(@$differ) . ' replays differ from the first answer');
push @{ $sc->{notes} }, @events;
push @{ $sc->{notes} }, sprintf('cluster answers to the gateway and to this script: MOVED %d, ASK %d',
                                Idem::RedisCluster::cluster_errors(\@ports, 'MOVED'), Idem::RedisCluster::cluster_errors(\@ports, 'ASK'));
push @{ $sc->{notes} }, 'replays: ' . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

done_testing();
