# Scenario 13: large responses kept in pieces while Redis lags. 12 keys
# (STRESS_SCALE scales them, at least 4), each a 16 MB incompressible
# response, 4 at a time, through one worker whose Redis is throttled to
# 10 MB/s (a proxy in front of it, t/lib/Idem/FaultProxy.pm), half of them
# with proxy_buffering off; the client of one key leaves after the status
# line, and the reply to one piece's write is cut with its connection. The
# worker's peak resident memory (VmHWM) must grow by less than 16 MB and
# 4 MB per capture at once — the captures hold a piece at the store and the
# one they fill, never the response, the upstream paced to Redis — whatever
# the 192 MB that pass; every key executes once; afterwards every key
# replays whole, byte for byte what its client got (the one whose client
# left: what the upstream sent), or 410 only where the log says a piece
# never landed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Digest::SHA qw(sha256_hex);
use IO::Socket::INET;
use Time::HiRes qw(time);

use Idem::FaultProxy;
use Idem::HTTP;
use Idem::Nginx;
use Idem::Redis;
use Idem::Stress;
use Idem::Upstream;
use Idem::Wait;

use constant {
    MB          => 1024 * 1024,
    SIZE        => 16,          # MB per response
    THROTTLE    => 10,          # MB/s Redis takes
    CONCURRENCY => 4,
    RSS_SLACK   => 16,          # MB the worker may grow by, beside ...
    RSS_PER     => 4,           # ... MB per capture at once (two pieces of 1m, the connection's copy, slack)
    LOAD_LIMIT  => 240,         # s for the load
};

my $KEYS = Idem::Stress::scaled(12, 4);

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(13, "$KEYS responses of " . SIZE . ' MB, ' . CONCURRENCY . ' at a time, through '
                                         . 'one worker whose Redis takes ' . THROTTLE . ' MB/s (buffering on and off; '
                                         . 'a client that leaves, a piece whose reply is cut)');
my $px = Idem::FaultProxy::fault_proxy_start(Idem::Redis::redis_port());
Idem::Stress::note("fault proxy pid $px->{pid} on 127.0.0.1:$px->{port}, to Redis on @{[ Idem::Redis::redis_port() ]}");
my $pieces = 'idempotency on; idempotency_redis 127.0.0.1:' . $px->{port} . '; idempotency_max_response_size 64m; '
           . 'idempotency_piece_size 1m;';
my $ng = Idem::Stress::gateway('s13', workers => 1, locations => <<"LOC");
        location /s13on/  { $pieces proxy_pass http://payments; }
        location /s13off/ { $pieces proxy_buffering off; proxy_pass http://payments; }
LOC
my ($worker) = Idem::Nginx::workers_of($ng->{pid});

sub peak_mb {
    open my $fh, '<', "/proc/$worker/status" or die "worker $worker: $!\n";
    while (<$fh>) { return $1 / 1024 if /^VmHWM:\s+(\d+)/ }
    die "worker $worker: no VmHWM\n";
}

my @keys = map { { path => ($_ % 2 ? '/s13off/' : '/s13on/') . "k$_", key => "s13-$_",
                   query => '?kind=noise&size=' . SIZE * MB } } 1 .. $KEYS;
my $request = sub {
    my ($k) = @_;
    return { port => $ng->{port}, method => 'POST', path => $k->{path} . $k->{query}, body => 'x', timeout => 120,
             headers => [['Idempotency-Key', $k->{key}]], k => $k };
};

# A first response through the gateway warms up what a capture keeps for good.
my $warm = Idem::HTTP::http_once({ port => $ng->{port}, method => 'POST', path => '/s13on/warm?kind=noise&size=' . 3 * MB,
                                   body => 'x', headers => [['Idempotency-Key', 's13-warm']] }, 60);
Idem::Stress::check($sc, ($warm->{status} // 0) == 201, 'the warm-up response came', "warm-up: "
                    . ($warm->{status} // $warm->{error}));
Idem::FaultProxy::fault_proxy_rate($px, THROTTLE * MB);
my $peak_before = peak_mb();
Idem::Stress::note(sprintf 'worker %d: peak %.1f MB before the load; Redis throttled to %d MB/s', $worker, $peak_before,
                   THROTTLE);

# The client of the first key leaves after the status line; the reply to
# the write of piece 5 of a later one is cut, once.
my $leaver = shift @keys;
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ng->{port}, Timeout => 10)
    or die "connect: $!\n";
print {$sock} "POST $leaver->{path}$leaver->{query} HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: $leaver->{key}\r\n"
            . "Connection: close\r\nContent-Length: 1\r\n\r\nx";
my $status_line = <$sock> // '';
close $sock;
$sc->{requests}++;
Idem::Stress::note("the client of $leaver->{key} left after: $status_line" =~ s/\r?\n\z//r);
Idem::FaultProxy::fault_proxy_mode($px, 'cut', 1, ':00000005');

my $t0 = time;
my %first;
my $p = Idem::HTTP::pool_new(concurrency => CONCURRENCY, on_done => sub {
    my ($req, $res) = @_;
    Idem::Stress::count_answer($sc, $res);
    $first{ $req->{k}{key} } = $res;
    Idem::Stress::vnote(sprintf '%s: %s, %d bytes in %.1f s', $req->{k}{key}, $res->{status} // $res->{error},
                        length($res->{body} // ''), $res->{elapsed} // 0);
});
Idem::HTTP::pool_submit($p, $request->($_)) for @keys;
my $finished = Idem::HTTP::pool_run($p, time + LOAD_LIMIT);
my $load_secs = time - $t0;
my $peak_after = peak_mb();
Idem::FaultProxy::fault_proxy_rate($px, 0);
Idem::FaultProxy::fault_proxy_mode($px, 'pass');
my $stats = Idem::FaultProxy::fault_proxy_stats($px);
Idem::Stress::check($sc, $finished, 'the load finished in time', 'the load did not finish within ' . LOAD_LIMIT . ' s');
my @whole = grep { ($first{ $_->{key} }{status} // 0) == 201 && length($first{ $_->{key} }{body}) == SIZE * MB } @keys;
Idem::Stress::check($sc, @whole == @keys, 'every client got its whole response',
                    (@keys - @whole) . ' clients did not get a whole 201');
my $grew = $peak_after - $peak_before;
my $bound = RSS_SLACK + RSS_PER * CONCURRENCY;
push @{ $sc->{notes} }, sprintf('peak RSS of the worker: %.1f MB before the load, %.1f MB after (+%.1f MB; bound %d MB) '
                                . 'for %d MB through Redis at %d MB/s in %.1f s (%.1f MB/s); %d reply cut',
                                $peak_before, $peak_after, $grew, $bound, $KEYS * SIZE, THROTTLE, $load_secs,
                                $KEYS * SIZE / $load_secs, $stats->{cut});
# under ASan freed memory stays in quarantine a while: no bound holds
Idem::Stress::check($sc, $grew < $bound || Idem::Nginx::asan(), "the worker's peak grew by less than $bound MB",
                    sprintf('the worker\'s peak grew by %.1f MB', $grew));

# Once every capture has settled (the one whose client left too), each
# key once more: a replay of the whole, or 410 where a piece never landed.
my @all = ($leaver, @keys);
my (%tally, @bad);
my $never_landed = 0;
for my $k (@all) {
    my $res;
    Idem::Wait::wait_until(sub {
        $res = Idem::HTTP::http_once($request->($k), 120);
        $sc->{requests}++;
        ($res->{status} // 0) != 409;
    }, 120);
    Idem::Stress::count_answer($sc, $res);
    my $label = ($res->{status} // $res->{error}) . (($res->{headers}{'idempotent-replayed'} // '') eq 'true' ? ' replayed' : '');
    $tally{$label}++;
    my $got = $first{ $k->{key} };
    my $same = $got ? sha256_hex($res->{body} // '') eq sha256_hex($got->{body} // '')
                    : length($res->{body} // '') == SIZE * MB;
    push @bad, "$k->{key}: $label" unless ($label eq '201 replayed' && $same) || $label =~ /^410/;
    $never_landed++ if $label =~ /^410/;
}
push @{ $sc->{notes} }, 'replays: ' . join(', ', map { "$_: $tally{$_}" } sort keys %tally);
Idem::Stress::check($sc, !@bad, 'every key replays whole, byte for byte (or 410)', join('; ', @bad));
my $log = do { local $/; open my $fh, '<', "$ng->{dir}/logs/error.log" or die "error log: $!\n"; <$fh> // '' };
my $gave_up = () = $log =~ /gave up writing piece/g;
Idem::Stress::check($sc, $never_landed <= $gave_up, 'a 410 only where a piece never landed',
                    "$never_landed keys answered 410, $gave_up pieces given up in the log");
my $sent_again = () = $log =~ /to write piece \d+ of the response to "[^"]+" succeeded/g;
push @{ $sc->{notes} }, "pieces sent again after a lost reply: $sent_again";

my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @all);
my $twice = grep { ($counts->{ $_->{path} } // 0) != 1 } @all;
$sc->{executions} = 0;
$sc->{executions} += $_ for values %$counts;
$sc->{duplicates} = 0;
$sc->{duplicates} += $_ > 1 ? $_ - 1 : 0 for values %$counts;
Idem::Stress::check($sc, !$twice, 'every key executed once', "$twice keys executed other than once");
Idem::Nginx::nginx_stop($ng);
Idem::Stress::report_log($sc, $ng);
Idem::Stress::scenario_end($sc);
done_testing();
