# Scenario 14a: a thousand duplicates (STRESS_SCALE scales them, at least
# 200) of 20 slow originals, each answered 409 while its original runs,
# through one Redis that stalls (CLIENT PAUSE) for
# 1.5 idempotency_redis_timeout while they are in flight: the stall costs
# only the requests whose own deadline it passed (their 503 counted and
# printed), never a connection (every worker keeps its connection to
# Redis: the gateway's client ids are the same after), never a second
# execution; every key replays afterwards.
# Scenario 14b: behind Redis Sentinel, the master dies with nothing in
# flight and is failed over; then 200 new keys (scaled, at least 40) on a
# gateway of 2 workers: none gets 503 (the first request on each worker
# asks the sentinels before it meets the dead master), each is executed
# once and replays.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Redis;
use Idem::RedisSentinel;
use Idem::Stress;
use Idem::Upstream;
use Idem::Wait;

use constant {
    ORIGINALS => 20,
    TIMEOUT_MS => 1000,   # idempotency_redis_timeout
    STALL_MS   => 1500,   # between one and two timeouts
};

my $DUPLICATES = Idem::Stress::scaled(1000, 200);
my $NEW_KEYS = Idem::Stress::scaled(200, 40);

Idem::Stress::setup();

# ------------------------------------------------------------ 12a: the stall

my $sc = Idem::Stress::scenario_begin('14a', "$DUPLICATES duplicates of " . ORIGINALS . ' slow originals while Redis '
    . 'stalls for ' . STALL_MS . ' ms (idempotency_redis_timeout ' . TIMEOUT_MS . ' ms)');
my $ng = Idem::Stress::gateway('s12a', workers => 2,
    locations => "        location /s12/ { idempotency on; idempotency_redis_timeout "
               . TIMEOUT_MS . "ms; proxy_pass http://payments; }\n");

# The gateway's connections to Redis: every client but the test's own
# (each of its commands opens a connection; the last ran a CLIENT command).
sub gateway_clients {
    my $list = Idem::Redis::redis_command('CLIENT', 'LIST');
    return join ' ', sort { $a <=> $b } map { /\bid=(\d+)/ ? $1 : () } grep { !/\bcmd=client\|/ } split /\n/, $list;
}

# Every worker connected to Redis: rounds of 20 keys at once until both
# workers took one (the kernel may hand a round to one worker).
my $before = '';
for my $round (1 .. 20) {
    my @warm = map { { path => "/s12/w$round-$_", key => "s12-warm-$round-$_", body => 'x' } } 1 .. 20;
    Idem::Stress::keyed_load(sc => $sc, keys => \@warm, port => $ng->{port}, max_attempts => 1, time_limit => 30);
    $before = gateway_clients();
    last if split(' ', $before) == 2;
}
Idem::Stress::check($sc, split(' ', $before) == 2, 'both workers connected to Redis before the stall',
                    "the gateway held connections [$before] to Redis, not one per worker");

my @keys = map { { path => "/s12/k$_", key => "s12-key-$_", body => "{\"order\":$_}", query => '?sleep=3' } } 1 .. ORIGINALS;
my (%answers, $stalled_at, @late, $p);
my $late_sent = 0;
my $submit = sub {
    my ($k) = @_;
    $late_sent++ if $stalled_at && time > $stalled_at + (STALL_MS - 0.6 * TIMEOUT_MS) / 1000
                    && time < $stalled_at + STALL_MS / 1000;
    Idem::HTTP::pool_submit($p, { port => $ng->{port}, method => 'POST', path => $k->{path} . $k->{query},
                                  timeout => 20, body => $k->{body}, sent => time,
                                  headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] });
};
# The originals first (the upstream takes 3 s); once they all reached it,
# the duplicates in batches of 20 every 40 ms (2 s for a thousand); the
# stall begins when a quarter of them are sent, so that many are sent late
# in it, when it can no longer pass their deadline.
my ($sent, $originals_in, $next_batch, $next_look) = (0, 0, 0, 0);
$p = Idem::HTTP::pool_new(
    concurrency => 512,
    on_done => sub {
        my ($req, $res) = @_;
        Idem::Stress::count_answer($sc, $res);
        my $label = Idem::Stress::answer_label($res);
        $answers{$label}++;
        # a 503 for a request sent when the stall could no longer pass its deadline
        push @late, sprintf('%.2f', $req->{sent} - $stalled_at)
            if $label =~ /^503/ && $stalled_at && $req->{sent} > $stalled_at + (STALL_MS - 0.6 * TIMEOUT_MS) / 1000;
    },
    on_tick => sub {
        my $now = time;
        if (!$originals_in) {
            return 1 if $now < $next_look;
            $next_look = $now + 0.05;
            my $c = Idem::Upstream::upstream_counts(map { $_->{path} } @keys);
            $originals_in = !grep { !$_ } values %$c;
            return 1;
        }
        return 0 if $sent >= $DUPLICATES;
        return 1 if $now < $next_batch;
        $next_batch = $now + 0.04;
        $submit->($keys[ $sent++ % ORIGINALS ]) for 1 .. 20;
        if (!$stalled_at && $sent >= $DUPLICATES / 4) {
            Idem::Redis::redis_command('CLIENT', 'PAUSE', STALL_MS, 'ALL');
            $stalled_at = time;
        }
        return 1;
    });
$submit->($_) for @keys;
my $done = Idem::HTTP::pool_run($p, time + 60);
Idem::Stress::check($sc, $done, 'every request answered', 'requests left unanswered at the time limit');
Idem::Stress::note('answers: ', join(', ', map { "$_: $answers{$_}" } sort keys %answers));
Idem::Stress::note(sprintf '503s: %d of %d requests; %d of them sent when the stall could no longer pass their deadline',
                   scalar(grep { /^503/ } map { ($_) x $answers{$_} } keys %answers), $sent + ORIGINALS, scalar @late);
Idem::Stress::check($sc, $late_sent >= $DUPLICATES / 10, "requests were sent late in the stall ($late_sent)",
                    "only $late_sent requests were sent late in the stall: the scenario did not happen");
Idem::Stress::check($sc, !@late, 'no request sent late in the stall got 503: one slow reply costs its own request',
                    scalar(@late) . ' requests sent late in the stall got 503 (at ' . join(' ', @late[0 .. ($#late < 9 ? $#late : 9)]) . ' s)');
# the same connections (awaited: a test connection may still be closing)
my $after = '';
Idem::Wait::wait_until(sub { ($after = gateway_clients()) eq $before }, 5);
Idem::Stress::check($sc, $after eq $before, 'the workers kept their connections to Redis',
                    "a worker reconnected to Redis: the stall cost a connection ([$before] before, [$after] after)");
Idem::Stress::tally_executions($sc, \@keys);
my ($tally, $not) = Idem::Stress::replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 10);
Idem::Stress::check($sc, !@$not, 'every key replays', scalar(@$not) . ' keys did not replay');
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

# ------------------------------------------------------------ 12b: the idle master

$sc = Idem::Stress::scenario_begin('14b', "Redis Sentinel: the master dies with nothing in flight and is failed over; "
    . "then $NEW_KEYS new keys");
my ($sentinel, $master, $replica) = Idem::RedisSentinel::start_redis_sentinel(name => 's12');
my $gw = Idem::Stress::gateway('s12b', workers => 2,
    locations => "        location /s12b/ { idempotency on; idempotency_redis_sentinel s12 127.0.0.1:$sentinel; "
               . "proxy_pass http://payments; }\n");
my @warm = map { { path => "/s12b/w$_", key => "s12b-warm-$_", body => 'x' } } 1 .. 20;
my $st = Idem::Stress::keyed_load(sc => $sc, keys => \@warm, port => $gw->{port}, max_attempts => 1, time_limit => 30);
Idem::Stress::check($sc, $st->{done} == @warm, 'both workers store through the first master',
                    "$st->{done} of " . @warm . ' warm-up keys stored');
Idem::Redis::node_stop($master);
my $t_kill = time;
my $promoted = Idem::Wait::wait_until(sub { (Idem::RedisSentinel::sentinel_master_port('s12', $sentinel) // 0) == $replica }, 30);
Idem::Stress::check($sc, $promoted, 'the sentinel promoted the replica', 'the sentinel did not promote the replica within 30 s');
Idem::Stress::note(sprintf 'the replica named master %.1f s after the master died', time - $t_kill);
my @new = map { { path => "/s12b/k$_", key => "s12b-key-$_", body => "{\"order\":$_}" } } 1 .. $NEW_KEYS;
$st = Idem::Stress::keyed_load(sc => $sc, keys => \@new, port => $gw->{port}, max_attempts => 1, time_limit => 60,
                               concurrency => 8);
my $refused = grep { ($_->{final}{status} // 0) != 201 } @new;
Idem::Stress::note("after the failover: $st->{done} of $NEW_KEYS keys answered 2xx at the first attempt");
Idem::Stress::check($sc, !$refused, 'no request after the failover met the dead master',
                    "$refused of $NEW_KEYS requests after the failover got another answer than 201 (the first on a worker: the dead master)");
Idem::Stress::tally_executions($sc, \@new);
($tally, $not) = Idem::Stress::replay_check(sc => $sc, keys => \@new, port => $gw->{port}, within => 5);
Idem::Stress::check($sc, !@$not, 'every key replays', scalar(@$not) . ' keys did not replay');
Idem::Nginx::nginx_stop($gw);
Idem::Stress::report_log($sc, $gw);
Idem::Stress::scenario_end($sc);

done_testing();
