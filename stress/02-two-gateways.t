# Scenario 2: two gateways sharing one Redis race on the same 50 keys
# (STRESS_SCALE scales them, at least 5), 4 requests per gateway per key per
# round, 2 rounds: one execution per key, every other answer that key's
# replay or 409.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Stress;
use Idem::Upstream;

my $KEYS   = Idem::Stress::scaled(50, 5);
my $PER_GW = 4;    # requests per key and gateway, per round

Idem::Stress::setup();

my $sc = Idem::Stress::scenario_begin(2, "two gateways sharing one Redis race on $KEYS keys "
                                         . "($PER_GW per gateway per key per round, 2 rounds)");
my $gwa = Idem::Stress::gateway('s2a', workers => 2);
my $gwb = Idem::Stress::gateway('s2b', workers => 2);
my @paths = map { "/s2/k$_" } 1 .. $KEYS;
my %by_key;      # path => [results]
my $p = Idem::HTTP::pool_new(concurrency => 2 * $PER_GW * $KEYS,
                             on_done => sub { my ($req, $res) = @_; push @{ $by_key{ $req->{kpath} } }, $res });
for my $round (1, 2) {
    # Round 1 spreads each key's requests over 0.8 s, against a 0.5 s
    # upstream: some find the original in flight (409), some finished
    # (replay). Round 2 sends them all at once again.
    for my $path (@paths) {
        (my $key = $path) =~ s{.*/}{s2-};
        for my $gw (($gwa) x $PER_GW, ($gwb) x $PER_GW) {
            Idem::HTTP::pool_submit($p, { port => $gw->{port}, method => 'POST', path => "$path?sleep=0.5",
                                          kpath => $path, timeout => 20, body => "{\"key\":\"$key\"}",
                                          headers => [['Idempotency-Key', $key], ['Content-Type', 'application/json']] },
                                    $round == 1 ? rand 0.8 : 0);
        }
    }
    Idem::HTTP::pool_run($p, time + 40);
}
my $counts = Idem::Upstream::upstream_counts(@paths);
my ($multi, $none, $bad_bodies, $bad_status, $firsts) = (0, 0, 0, 0, 0);
for my $path (@paths) {
    my $c = $counts->{$path};
    $sc->{executions} += $c;
    $sc->{duplicates} += $c - 1 if $c > 1;
    $multi++ if $c > 1;
    $none++ if $c < 1;
    my @r = @{ $by_key{$path} // [] };
    Idem::Stress::count_answer($sc, $_) for @r;
    my @ok = grep { !$_->{error} && $_->{status} == 201 } @r;
    my %bodies = map { $_->{body} => 1 } @ok;
    $bad_bodies++ if keys %bodies > 1;
    $firsts += grep { !$_->{headers}{'idempotent-replayed'} } @ok;
    $bad_status += grep { $_->{error} || ($_->{status} != 201 && $_->{status} != 409) } @r;
}
Idem::Stress::check($sc, !$multi, 'no key executed more than once', "$multi keys executed more than once");
Idem::Stress::check($sc, !$none, 'every key executed', "$none keys never executed");
Idem::Stress::check($sc, !$bad_bodies, "each key's 201s carry one body", "$bad_bodies keys answered with different 201 bodies");
Idem::Stress::check($sc, $firsts == $KEYS, 'one first execution per key', "$firsts first executions for $KEYS keys");
Idem::Stress::check($sc, !$bad_status, 'every answer 201 or 409', "$bad_status answers neither 201 nor 409");
my $expected = 2 * 2 * $PER_GW * $KEYS;
Idem::Stress::check($sc, $sc->{requests} == $expected, 'every request answered',
                    "$sc->{requests} answers for $expected requests");
Idem::Nginx::nginx_stop($_) for $gwa, $gwb;
Idem::Stress::report_log($sc, $_) for $gwa, $gwb;
Idem::Stress::scenario_end($sc);

done_testing();
