# Scenario 5: the worker running a request is SIGKILLed
# (idempotency_lock_ttl 2s, upstream sleep=3): the claim stays (409) and
# expires after idempotency_lock_ttl, not before its last renewal could have
# run out; then a retry executes, and the key replays after it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time sleep);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Stress;
use Idem::Upstream;
use Idem::Wait;

Idem::Stress::setup();

# The pid of the worker holding an established connection to $port.
sub worker_connected_to {
    my ($master, $port) = @_;
    my %inodes;
    for my $file ('/proc/net/tcp', '/proc/net/tcp6') {
        open my $fh, '<', $file or next;
        <$fh>;
        while (<$fh>) {
            my @f = split ' ';
            my ($rport) = $f[2] =~ /:([0-9A-F]{4})$/i or next;
            my ($lport) = $f[1] =~ /:([0-9A-F]{4})$/i or next;
            $inodes{ $f[9] } = 1 if hex($rport) == $port && hex($lport) != $port && $f[3] eq '01';
        }
    }
    for my $w (Idem::Nginx::workers_of($master)) {
        opendir my $dh, "/proc/$w/fd" or next;
        for my $fd (readdir $dh) {
            my $link = readlink "/proc/$w/fd/$fd" // next;
            return $w if $link =~ /^socket:\[(\d+)\]$/ && $inodes{$1};
        }
    }
    return;
}

my $sc = Idem::Stress::scenario_begin(5, 'the worker running a request is SIGKILLed (idempotency_lock_ttl 2s, upstream sleep=3)');
my $ng = Idem::Stress::gateway('s5', workers => 2);
my $path = '/s5/pay';
my $req = { port => $ng->{port}, method => 'POST', path => "$path?sleep=3",
            headers => [['Idempotency-Key', 's5-key'], ['Content-Type', 'application/json']],
            body => '{"amount":100}' };
my $count = sub { Idem::Upstream::upstream_count($path) };
my $orig = Idem::HTTP::open_request($req);
$sc->{requests}++;
my $reached = Idem::Wait::wait_until(sub { $count->() >= 1 }, 5);
Idem::Stress::check($sc, $reached, 'the original reached the upstream', 'the original never reached the upstream');
my ($killed_at, @killed);
if ($reached) {
    my $worker = worker_connected_to($ng->{pid}, Idem::Upstream::upstream_port());
    my @before = Idem::Nginx::workers_of($ng->{pid});
    if ($worker) {
        @killed = ($worker);
        Idem::Stress::note("SIGKILL to worker $worker, the one connected to the upstream (workers were @before)");
    } else {
        @killed = @before;     # it is one of them
        Idem::Stress::note("cannot tell which worker holds the upstream connection: SIGKILL to all workers (@before)");
        push @{ $sc->{notes} }, "all workers killed (@before): the one running the request was not identified";
    }
    kill 'KILL', @killed;
    $killed_at = time;
}
my $ores = Idem::HTTP::collect_response($orig, 2) // { error => 'no answer' };
$sc->{answers}{ 'original: ' . Idem::Stress::answer_label($ores) }++;
close $orig->{sock} if $orig->{sock};

my ($executed_after, $answered_unexecuted, @seen);
if ($killed_at) {
    # Right after the kill the claim must still be there: 409.
    my $r = Idem::HTTP::http_once({ %$req }, 5);
    Idem::Stress::count_answer($sc, $r);
    push @seen, sprintf('%.2fs %s', time - $killed_at, Idem::Stress::answer_label($r));
    Idem::Stress::check($sc, !$r->{error} && $r->{status} == 409, 'the retry right after the kill gets 409 (claim kept)',
        'the retry right after the kill got ' . Idem::Stress::answer_label($r) . ', expected 409 (claim kept)');
    # Then a retry every 100 ms (the resolution of the measure) until one
    # is executed (bounded: 10 s).
    my $limit = time + 10;
    my $execs = $count->();
    while (time < $limit) {
        my $sent = time;
        my $st = Idem::HTTP::open_request($req);
        $sc->{requests}++;
        my $res = Idem::HTTP::collect_response($st, 0.5);
        if (!$res && $count->() > $execs) {
            $executed_after = $sent - $killed_at;
            $res = Idem::HTTP::collect_response($st, 10) // { error => 'timeout' };
            $sc->{answers}{ Idem::Stress::answer_label($res) }++;
            push @seen, sprintf('%.2fs %s (executed, X-Upstream-Execution %s)', $sent - $killed_at,
                                Idem::Stress::answer_label($res), $res->{headers}{'x-upstream-execution'} // '-');
            close $st->{sock} if $st->{sock};
            last;
        }
        $res //= Idem::HTTP::collect_response($st, 10) // { error => 'timeout' };
        close $st->{sock} if $st->{sock};
        $sc->{answers}{ Idem::Stress::answer_label($res) }++;
        push @seen, sprintf('%.2fs %s', $sent - $killed_at, Idem::Stress::answer_label($res))
            if @seen < 3 || !$res->{error} && $res->{status} != 409;
        if (!$res->{error} && $res->{status} =~ /^2/) {
            # answered at once: it was not executed by this retry
            $answered_unexecuted = Idem::Stress::answer_label($res);
            last;
        }
        sleep 0.1;
    }
    Idem::Stress::check($sc, !$answered_unexecuted, 'no retry got a 2xx without a new execution',
                        'a retry got ' . ($answered_unexecuted // '') . ' without a new execution');
}
my $execs = $count->();
$sc->{executions} = $execs;
$sc->{duplicates} = 0;   # the second execution is the documented one, after lock_ttl
if ($killed_at) {
    Idem::Stress::check($sc, defined $executed_after, 'a retry executed within 10 s of the kill',
                        'no retry executed within 10 s of the kill: the claim is stuck');
    if (defined $executed_after) {
        push @{ $sc->{notes} }, sprintf('retry executed %.2f s after the SIGKILL (lock_ttl 2 s, renewed every 0.67 s)',
                                        $executed_after);
        Idem::Stress::check($sc, $executed_after >= 2 * 2 / 3 - 0.2, 'the claim outlived its last renewal',
            sprintf('the claim was gone %.2f s after the kill, before lock_ttl could have run out', $executed_after));
        Idem::Stress::check($sc, $executed_after <= 2 + 0.6, 'the claim expired within lock_ttl',
            sprintf('the claim outlived lock_ttl: retry executed %.2f s after the kill', $executed_after));
    }
    Idem::Stress::check($sc, $execs == 2, 'two executions: the killed original and the retry after lock_ttl',
                        "$execs executions, expected 2 (the killed original and the retry after lock_ttl)");
    my @now = Idem::Nginx::workers_of($ng->{pid});
    push @{ $sc->{notes} }, "workers after the kill: @now";
    Idem::Stress::check($sc, @now >= 2, 'the master replaced the killed worker', 'the master did not replace the killed worker');
    # The replay after the retry completed.
    my $r = Idem::HTTP::http_once({ %$req }, 5);
    Idem::Stress::count_answer($sc, $r);
    my $replayed = ($r->{headers}{'idempotent-replayed'} // '') eq 'true';
    push @seen, 'after: ' . Idem::Stress::answer_label($r) . ($replayed ? ' (Idempotent-Replayed)' : '');
    Idem::Stress::check($sc, !$r->{error} && $r->{status} == 201 && $replayed, 'the key replays after the retry completed',
                        'the key did not replay after the retry completed');
}
push @{ $sc->{notes} }, 'original: ' . Idem::Stress::answer_label($ores) . '; retries: ' . join('; ', @seen);
my $killed_re = join '|', @killed;
Idem::Nginx::allow_log($ng, qr/worker process (?:$killed_re) exited on signal 9\b/) if @killed;
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);

done_testing();
