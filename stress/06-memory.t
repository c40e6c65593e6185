# Scenario 6: memory. 100000 requests (STRESS_SCALE scales them, at least
# 2000): 40% new keys, 40% replays, 20% without a key, to a gateway with
# worker_processes 1 in front of an nginx backend: the worker's VmRSS after
# 1k/10k/50k/100k must not grow more than 20% between 10k and 100k; every
# replay is the stored first answer; the backend executes once per new key
# and once per request without a key.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Proc;
use Idem::Stress;

use constant {
    TIME_LIMIT     => 100,     # seconds for the requests
    RSS_GROWTH_MAX => 0.20,
    CONCURRENCY    => 32,
};

my $REQUESTS = Idem::Stress::scaled(100_000, 2000);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(6, "memory: $REQUESTS requests (40% new keys, 40% replays, 20% no key), "
                                         . 'worker_processes 1, concurrency ' . CONCURRENCY);
my $ng = Idem::Stress::gateway('s6', workers => 1, backend => 1);
my ($worker) = Idem::Nginx::workers_of($ng->{pid});
my @checkpoints = grep { $_ <= $REQUESTS } map { int $_ } (1000, 10_000, 50_000, 100_000);
push @checkpoints, $REQUESTS unless grep { $_ == $REQUESTS } @checkpoints;
my %rss;
my @done_keys;          # [key, body of the first answer, request body]
my %kinds;
my ($mismatch, $unexpected) = (0, 0);
my $i = 0;
my $feed = sub {
    return undef if $i >= $REQUESTS;
    $i++;
    my $slot = $i % 10;
    my $req = { port => $ng->{port}, method => 'POST', timeout => 10 };
    if ($slot < 4 || ($slot < 8 && !@done_keys)) {
        $req->{kind} = 'new';
        $req->{key} = "s6-$i";
        $req->{path} = '/s6/pay';
        $req->{body} = "{\"order\":$i}";
        $req->{headers} = [['Idempotency-Key', $req->{key}], ['Content-Type', 'application/json']];
    } elsif ($slot < 8) {
        my $k = $done_keys[ int rand @done_keys ];
        $req->{kind} = 'replay';
        $req->{orig} = $k;
        $req->{path} = '/s6/pay';
        $req->{body} = $k->[2];
        $req->{headers} = [['Idempotency-Key', $k->[0]], ['Content-Type', 'application/json']];
    } else {
        $req->{kind} = 'nokey';
        $req->{path} = "/s6/free?n=$i";
        $req->{body} = "{\"n\":$i}";
        $req->{headers} = [['Content-Type', 'application/json']];
    }
    return $req;
};
my $p = Idem::HTTP::pool_new(
    concurrency => CONCURRENCY, feed => $feed,
    on_done => sub {
        my ($req, $res) = @_;
        Idem::Stress::count_answer($sc, $res);
        $kinds{ $req->{kind} }++;
        my $replayed = ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
        if ($res->{error} || $res->{status} != 201) {
            $unexpected++;
        } elsif ($req->{kind} eq 'new') {
            $unexpected++ if $replayed;
            push @done_keys, [$req->{key}, $res->{body}, $req->{body}];
        } elsif ($req->{kind} eq 'replay') {
            $mismatch++ if !$replayed || $res->{body} ne $req->{orig}[1];
        }
        if (@checkpoints && $sc->{requests} >= $checkpoints[0]) {
            my $cp = shift @checkpoints;
            $rss{$cp} = Idem::Proc::vm_rss_kb($worker);
            Idem::Stress::note(sprintf 'after %6d requests: worker %d VmRSS %s kB (%.1f s)', $cp, $worker,
                               $rss{$cp} // '?', time - $sc->{start});
        }
    });
my $completed = Idem::HTTP::pool_run($p, time + TIME_LIMIT);
my ($w_now) = Idem::Nginx::workers_of($ng->{pid});
Idem::Stress::check($sc, ($w_now // 0) == $worker, 'the worker did not crash',
                    "the worker changed ($worker -> " . ($w_now // 'none') . '): it crashed');
Idem::Stress::check($sc, $completed, 'every request answered within the time limit',
                    "only $sc->{requests} of $REQUESTS requests in the " . TIME_LIMIT . ' s limit');
Idem::Stress::check($sc, !$unexpected, 'every answer 201, no new key replayed',
                    "$unexpected unexpected answers (not 201, or a new key replayed)");
Idem::Stress::check($sc, !$mismatch, 'every replay is the stored first answer', "$mismatch replays were not the stored first answer");
Idem::Nginx::nginx_stop($ng);     # flushes the backend's access log
my $executions = 0;
if (open my $fh, '<', "$ng->{dir}/logs/backend.log") { $executions++ while <$fh> }
$sc->{executions} = $executions;
my $expected = ($kinds{new} // 0) + ($kinds{nokey} // 0);
$sc->{duplicates} = $executions > $expected ? $executions - $expected : 0;
push @{ $sc->{notes} }, "backend executions $executions for " . ($kinds{new} // 0) . ' new keys + '
    . ($kinds{nokey} // 0) . ' no-key requests; ' . ($kinds{replay} // 0) . ' replays';
Idem::Stress::check($sc, $executions == $expected, 'the backend executed once per new key and per request without one',
                    "backend executed $executions times, expected $expected");
my @cps = sort { $a <=> $b } keys %rss;
push @{ $sc->{notes} }, 'worker VmRSS: ' . join(', ', map { "${_}: $rss{$_} kB" } @cps);
my ($from, $to) = ($rss{10_000}, $rss{ $cps[-1] });
if ($from && $to && $cps[-1] > 10_000) {
    my $growth = ($to - $from) / $from;
    push @{ $sc->{notes} }, sprintf('VmRSS growth from 10k to %d requests: %+.1f%% (limit %d%%)',
                                    $cps[-1], 100 * $growth, 100 * RSS_GROWTH_MAX);
    Idem::Stress::check($sc, $growth <= RSS_GROWTH_MAX, 'the worker VmRSS grew at most 20% from 10k requests',
        sprintf('worker VmRSS grew %.1f%% between 10k and %d requests', 100 * $growth, $cps[-1]));
}
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

done_testing();
