# Scenarios 1, 7 and 11: simultaneous POSTs with one key against a slow
# upstream (sleep=1), with idempotency_wait 0 (a) and 5s (b): one
# execution, every other answer the identical replay (or 409 with wait 0).
#   1   the Redis store
#   7   the shared memory zone store (idempotency_store zone=stress), across
#       the two workers
#   11  a second redis-server reached over TLS (idempotency_redis ... ssl,
#       its certificate checked against a CA made with openssl): the
#       response stored in that Redis, no TLS failure counted
# 200 requests (STRESS_SCALE scales them, at least 20).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use Digest::SHA ();
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Redis;
use Idem::Stress;
use Idem::TLS;
use Idem::Upstream;

my $REQUESTS = Idem::Stress::scaled(200, 20);

Idem::Stress::setup();

my ($tls_plain, $tls_port);

sub tls_locations {
    my $tls = "idempotency_redis 127.0.0.1:$tls_port ssl; idempotency_redis_ssl_trusted_certificate "
            . Idem::TLS::tls_files()->{ca} . ';';
    return "        location /s11w0/ { idempotency on; $tls proxy_pass http://payments; }\n"
         . "        location /s11w5/ { idempotency on; idempotency_wait 5s; $tls proxy_pass http://payments; }\n";
}

# $store: 'redis', 'zone' or 'tls'.
sub one_key {
    my ($id, $wait, $store) = @_;
    my ($zone, $tls) = ($store eq 'zone', $store eq 'tls');
    my $loc = ($zone ? 's7' : $tls ? 's11' : 's1') . ($wait ? 'w5' : 'w0');
    my $sc = Idem::Stress::scenario_begin($id, "$REQUESTS simultaneous POSTs, one key, upstream sleep=1, "
        . 'idempotency_wait ' . ($wait ? '5s' : '0')
        . ($zone ? ', store: shared memory zone' : $tls ? ', store: Redis over TLS' : ''));
    ($tls_plain, $tls_port) = Idem::TLS::start_redis_tls() if $tls && !$tls_port;
    my $ng = Idem::Stress::gateway("s$id", workers => 2, $tls ? (locations => tls_locations()) : ());
    my $path = "/$loc/pay";
    my $key = "s$id-" . int(rand 1e9);
    my @res;
    my $p = Idem::HTTP::pool_new(concurrency => $REQUESTS, on_done => sub { push @res, $_[1] });
    Idem::HTTP::pool_submit($p, { port => $ng->{port}, method => 'POST', path => "$path?sleep=1", timeout => 20,
        headers => [['Idempotency-Key', $key], ['Content-Type', 'application/x-www-form-urlencoded']],
        body => 'amount=100&currency=EUR' }) for 1 .. $REQUESTS;
    Idem::HTTP::pool_run($p, time + 30);
    Idem::Stress::count_answer($sc, $_) for @res;

    my $count = Idem::Upstream::upstream_counts($path)->{$path};
    $sc->{executions} = $count;
    $sc->{duplicates} = $count > 1 ? $count - 1 : 0;
    Idem::Stress::check($sc, $count == 1, 'one upstream execution', "$count upstream executions, expected exactly 1");

    my @orig = grep { !$_->{error} && $_->{status} == 201 && !$_->{headers}{'idempotent-replayed'} } @res;
    my @replays = grep { !$_->{error} && $_->{status} == 201 && ($_->{headers}{'idempotent-replayed'} // '') eq 'true' } @res;
    my @conflicts = grep { !$_->{error} && $_->{status} == 409 } @res;
    Idem::Stress::check($sc, @orig == 1, 'one answer is the first execution',
        scalar(@orig) . ' answers were first executions (201 without Idempotent-Replayed), expected 1');
    my ($differ, $other_exec) = (0, 0);
    if (@orig) {
        my $body = $orig[0]{body};
        $differ = grep { $_->{body} ne $body } @replays;
        $other_exec = grep { ($_->{headers}{'x-upstream-execution'} // '') ne ($orig[0]{headers}{'x-upstream-execution'} // '-') } @replays;
        push @{ $sc->{notes} }, "first 201 body: $body";
    }
    Idem::Stress::check($sc, !$differ, "replays carry the first 201's body", "$differ replays differ from the first 201's body");
    Idem::Stress::check($sc, !$other_exec, "replays carry the first 201's X-Upstream-Execution",
        "$other_exec replays carry another X-Upstream-Execution");
    my $bad_409 = grep { ($_->{headers}{'retry-after'} // '') !~ /^[1-9]\d*$/
                         || ($_->{headers}{'content-type'} // '') !~ m{application/problem\+json} } @conflicts;
    Idem::Stress::check($sc, !$bad_409, '409s carry Retry-After >= 1 and problem+json',
        "$bad_409 answers 409 lack Retry-After >= 1 or problem+json");
    my $others = @res - @orig - @replays - @conflicts;
    Idem::Stress::check($sc, !$others, 'every answer is the first 201, a replay or 409',
        "$others answers are neither the first 201, a replay nor 409");
    Idem::Stress::check($sc, @res == $REQUESTS, 'every request answered',
        'only ' . scalar(@res) . " of $REQUESTS requests answered");
    if ($wait) {
        Idem::Stress::check($sc, !@conflicts, 'no 409 while idempotency_wait 5s outlasts the upstream',
            scalar(@conflicts) . ' answers 409 although idempotency_wait 5s outlasts the 1 s upstream');
        my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @res;
        push @{ $sc->{notes} }, sprintf 'slowest answer %.2f s', $max // 0;
    }
    if ($tls) {
        my $failures = Idem::Stress::metrics_value($ng->{port}, 'idempotency_redis_tls_failures_total') // -1;
        Idem::Stress::check($sc, $failures == 0, 'no TLS failure counted',
            "idempotency_redis_tls_failures_total is $failures, expected 0");
        # the store key: the virtual server (unnamed here: ""), the scope (""), then the key
        my $spaced = '0:';
        my $record = eval {
            Idem::Redis::redis_command_at($tls_plain, 'GET', 'idem:' . Digest::SHA::sha256_hex(length($spaced) . ":$spaced$key"))
        };
        Idem::Stress::check($sc, defined $record && length $record > 4 && ord(substr($record, 4, 1)) == 2,
            'the Redis reached over TLS holds the response', 'the Redis reached over TLS holds no response for the key');
    }
    Idem::Nginx::nginx_stop($ng);
    Idem::Stress::report_log($sc, $ng);
    Idem::Stress::scenario_end($sc);
}

one_key('1a', 0, 'redis');
one_key('1b', 1, 'redis');
one_key('7a', 0, 'zone');
one_key('7b', 1, 'zone');
one_key('11a', 0, 'tls');
one_key('11b', 1, 'tls');

done_testing();
