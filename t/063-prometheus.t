# The metrics page scraped by a real Prometheus (Debian's `prometheus`, on
# a free loopback port, every second, its TSDB under the server root) with
# the rules of contrib/prometheus/ loaded: known traffic through the
# gateway (new keys, replays, a mismatch, a released 5xx, a duplicate that
# waited for its original and one whose wait ran out, a request without a
# key and one with an invalid key), then Prometheus's HTTP API: every
# series with its labels; increase() and rate() of the outcome counters,
# taken at the last scrape, exactly the traffic sent; histogram_quantile()
# over the Redis round-trip and waiting histograms finite and within their
# buckets; the recording rules' values, the wait-timeout alert pending and
# no other; and every PromQL expression of the Grafana dashboard
# (contrib/grafana/) answering with data. Prometheus is stopped by its pid
# and its directory removed (the server root keeps only Test::Nginx's).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(metered_location post);
use Idem::Prometheus;
use Test::Nginx::Socket 'no_plan';

# What the traffic leaves in idempotency_requests_total, by outcome.
our %expected = (new => 7, replayed => 3, waited => 1, conflict => 1, mismatch => 1, invalid => 1, missing => 1,
                 released => 1, unavailable => 0, unreplayable => 0, joined => 0);

test_nginx_defaults();
run_tests();

sub close_to {
    my ($got, $want) = @_;
    return defined $got && $got eq $got + 0 && abs($got - $want) < 1e-9 * ($want > 1 ? $want : 1);
}

sub raw {
    my ($headers) = @_;
    return IdempotencyTest::read_response(IdempotencyTest::send_request(
        "POST /p/raw HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${headers}Content-Length: 1\r\n\r\nx"));
}

sub traffic {
    my @got;
    push @got, post("/p/new-$_", "new-$_")->{status} for 1 .. 5;                # new
    push @got, post("/p/new-$_", "new-$_")->{status} for 1 .. 3;                # replayed
    push @got, post('/p/new-4', 'new-4', 'y')->{status};                       # mismatch
    push @got, post('/p/fail?status=500', 'fail')->{status};                   # released
    push @got, raw('')->{status};                                              # missing
    push @got, raw("Idempotency-Key: \"open\r\n")->{status};                  # invalid
    # The slow original is held 2 s: its duplicate's wait (1 s) runs out;
    # the quick one's 0.3 s does not: its duplicate gets the replay. Both
    # originals are new.
    my $slow = IdempotencyTest::start_in_flight('/p/slow?sleep=2', 'slow');
    my $slow_dup = IdempotencyTest::send_request("POST /p/slow?sleep=2 HTTP/1.1\r\nHost: localhost\r\n"
        . "Connection: close\r\nIdempotency-Key: slow\r\nContent-Length: 1\r\n\r\nx");
    my $quick = IdempotencyTest::start_in_flight('/p/quick?sleep=0.3', 'quick');
    push @got, post('/p/quick?sleep=0.3', 'quick')->{status};                  # waited
    push @got, map { IdempotencyTest::read_response($_)->{status} } $slow_dup, $slow, $quick;    # conflict, new, new
    Test::More::is("@got", '201 201 201 201 201 201 201 201 422 500 201 400 201 409 201 201',
                   'the traffic: 5 new, 3 replayed, a mismatch, a released 500, no key, an invalid key, '
                   . 'a duplicate waited for, one whose wait ran out, their originals');
}

sub outcomes_at {
    my ($prom, $expr, $time) = @_;
    return { map { ($_->{metric}{outcome} => $_->{value}) } Idem::Prometheus::vector($prom, $expr, $time) };
}

sub scenario {
    my $dir = "$ENV{TEST_NGINX_SERVER_ROOT}/prometheus";
    my $target = "127.0.0.1:$ENV{TEST_NGINX_SERVER_PORT}";
    my $prom = Idem::Prometheus::start(dir => $dir, target => $target,
                                       rules => ["$ENV{TEST_NGINX_REPO}/contrib/prometheus/idempotency.rules.yml"]);
    my $v = sub { Idem::Prometheus::value($prom, @_) };

    # The counters' first samples are the zeros from before any traffic.
    Idem::Wait::wait_for('the first scrape', sub { defined $v->('idempotency_requests_total{outcome="new"}') }, 15);
    Test::More::is($v->('up{job="idempotency"}'), 1, 'Prometheus scrapes the gateway');
    Test::More::is($v->('sum(idempotency_requests_total)'), 0, 'the first scrape is before any traffic');

    traffic();

    Idem::Wait::wait_for('a scrape with all the traffic counted', sub {
        my $now = outcomes_at($prom, 'idempotency_requests_total');
        !grep { ($now->{$_} // -1) != $expected{$_} } keys %expected;
    }, 15);
    # Everything below is taken at that scrape.
    my $t = $v->('timestamp(idempotency_requests_total{outcome="new"})');

    # The series and their labels.
    my @requests = Idem::Prometheus::vector($prom, 'idempotency_requests_total', $t);
    Test::More::is(join(' ', sort map { $_->{metric}{outcome} } @requests), join(' ', sort keys %expected),
                   'idempotency_requests_total: one series per outcome');
    Test::More::is(scalar(grep { $_->{metric}{job} eq 'idempotency' && $_->{metric}{instance} eq $target } @requests),
                   scalar(keys %expected), '... each with the job and the instance');
    my $label_values = sub {
        my ($expr, $label) = @_;
        join ' ', sort map { $_->{metric}{$label} } Idem::Prometheus::vector($prom, $expr, $t);
    };
    Test::More::is($label_values->('idempotency_redis_abandoned_total', 'operation'), 'release store',
                   'idempotency_redis_abandoned_total by operation');
    Test::More::is($label_values->('idempotency_zone_full_total', 'operation'), 'claim live store',
                   'idempotency_zone_full_total by operation');
    my @le = sort { $a <=> $b } map { $_->{metric}{le} eq '+Inf' ? 'Inf' : $_->{metric}{le} }
                 Idem::Prometheus::vector($prom, 'idempotency_redis_rtt_seconds_bucket', $t);
    Test::More::is(join(' ', map { $_ + 0 } @le),
                   '0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 Inf',
                   'idempotency_redis_rtt_seconds: buckets from 100 us to 1 s and +Inf');
    Test::More::is($label_values->('count by (__name__) ({job="idempotency", __name__=~"idempotency_.+"})', '__name__'),
                   join(' ', sort map { "idempotency_$_" }
                        qw(requests_total redis_commands_total redis_errors_total redis_timeouts_total
                           redis_reconnects_total redis_tls_failures_total live_logs_given_up_total
                           wait_timeouts_total stored_responses_total stored_bytes_total compressed_records_total
                           compression_saved_bytes_total redis_abandoned_total
                           redis_stores_out_of_memory_total redis_oom_markers_total zone_full_total
                           redis_rtt_seconds_bucket redis_rtt_seconds_sum redis_rtt_seconds_count
                           wait_seconds_bucket wait_seconds_sum wait_seconds_count)),
                   'every metric of the page, and no other');

    # increase() and rate() over the counters' whole life: the traffic sent.
    my $increase = outcomes_at($prom, 'increase(idempotency_requests_total[1h])', $t);
    my $rate = outcomes_at($prom, 'rate(idempotency_requests_total[1h]) * 3600', $t);
    for my $outcome (sort keys %expected) {
        Test::More::ok(close_to($increase->{$outcome}, $expected{$outcome}),
                       "increase(...{outcome=\"$outcome\"}) is $expected{$outcome} (got "
                       . ($increase->{$outcome} // 'nothing') . ')');
        Test::More::ok(close_to($rate->{$outcome}, $expected{$outcome}),
                       "rate(...{outcome=\"$outcome\"}[1h]) * 3600 is $expected{$outcome} (got "
                       . ($rate->{$outcome} // 'nothing') . ')');
    }
    Test::More::ok(close_to($v->('increase(idempotency_wait_timeouts_total[1h])', $t), 1),
                   'increase(idempotency_wait_timeouts_total) is 1');
    Test::More::ok(close_to($v->('increase(idempotency_wait_seconds_count[1h])', $t), 1),
                   'increase(idempotency_wait_seconds_count) is 1: the waits that ran out are not in it');
    Test::More::ok(close_to($v->('increase(idempotency_redis_abandoned_total{operation="store"}[1h])', $t), 0),
                   'nothing abandoned');

    # Quantiles within the buckets.
    my %q;
    for my $p (0.5, 0.99) {
        $q{$p} = $v->("histogram_quantile($p, sum by (le) (rate(idempotency_redis_rtt_seconds_bucket[1h])))", $t);
        Test::More::ok(defined $q{$p} && $q{$p} > 0 && $q{$p} <= 1,
                       "Redis round trip p$p in (0, 1 s] (got " . ($q{$p} // 'nothing') . ')');
    }
    Test::More::ok(defined $q{0.5} && defined $q{0.99} && $q{0.5} <= $q{0.99}, '... p50 <= p99');
    my $wait = $v->('histogram_quantile(0.5, sum by (le) (rate(idempotency_wait_seconds_bucket[1h])))', $t);
    Test::More::ok(defined $wait && $wait > 0 && $wait <= 1,
                   'the duplicate waited for less than its idempotency_wait, 1 s (p50 ' . ($wait // 'nothing') . ')');

    # The rules: evaluated without errors on the real series.
    Idem::Wait::wait_for('the recording rules on the whole traffic', sub {
        close_to($v->('idempotency:replay_ratio:rate5m'), 4 / 16);
    }, 15);
    Test::More::pass('idempotency:replay_ratio:rate5m: 4 of 16 requests replayed, waited for or joined');
    Test::More::ok(close_to($v->('idempotency:wait_timeout_ratio:rate5m'), 0.5),
                   'idempotency:wait_timeout_ratio:rate5m: 1 of the 2 waiting duplicates ran out');
    Test::More::ok(close_to($v->('idempotency:requests:ratio_rate5m{outcome="new"}'), 7 / 16),
                   'idempotency:requests:ratio_rate5m{outcome="new"}: 7 of 16');
    for my $p ('p50', 'p99') {
        my $q = $v->("idempotency:redis_rtt_seconds:${p}_rate5m");
        Test::More::ok(defined $q && $q > 0 && $q <= 1, "idempotency:redis_rtt_seconds:${p}_rate5m in (0, 1 s]");
    }
    my @rules = map { @{ $_->{rules} } } @{ Idem::Prometheus::api($prom, 'rules')->{groups} };
    Test::More::is(scalar(grep { $_->{health} eq 'ok' } @rules), 17, 'all 17 rules evaluated without error');
    my $alerts;
    Idem::Wait::wait_for('the wait-timeout alert pending', sub {
        $alerts = Idem::Prometheus::api($prom, 'alerts')->{alerts};
        grep { $_->{labels}{alertname} eq 'IdempotencyWaitTimeouts' } @$alerts;
    }, 15);
    # Any error reply Redis gave (a script cache flushed under the
    # connection: NOSCRIPT, sent again whole) is more than 1% of so few
    # commands: that alert would be pending until its for: has passed.
    my $errors = $v->('idempotency_redis_errors_total', $t);
    my $commands = $v->('idempotency_redis_commands_total', $t);
    Test::More::is(join(' ', sort map { "$_->{labels}{alertname}:$_->{state}:$_->{labels}{severity}:$_->{labels}{instance}" }
                                  @$alerts),
                   ($errors > 0.01 * $commands ? "IdempotencyRedisErrors:pending:warning:$target " : '')
                   . "IdempotencyWaitTimeouts:pending:warning:$target",
                   "that alert pending, and no other (but Redis's errors: $errors of $commands commands)");

    # The dashboard's expressions, on the gateway's series.
    my @exprs = Idem::Prometheus::dashboard_exprs("$ENV{TEST_NGINX_REPO}/contrib/grafana/idempotency-dashboard.json",
                                                  job => 'idempotency', instance => '.+', __rate_interval => '1h');
    Test::More::ok(@exprs >= 20, scalar(@exprs) . ' expressions in the dashboard');
    my @empty = grep { !@{ Idem::Prometheus::query($prom, $_->{expr}, $t)->{result} } } @exprs;
    Test::More::is(join('; ', map { "$_->{panel} $_->{refId}" } @empty), '', 'each answers with data');
    Test::More::is(scalar(@{ Idem::Prometheus::query($prom, $exprs[0]{expr}, $t)->{result} }), 11,
                   "\"$exprs[0]{panel}\": a series per outcome");

    Idem::Prometheus::stop($prom);
    Test::More::ok(!Idem::Proc::running($prom->{pid}) && !-e $dir, 'Prometheus stopped, its directory removed');
}

__DATA__

=== TEST 1: a real Prometheus scrapes the metrics page, evaluates the rules and the dashboard's queries
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::metered_location('idempotency_wait 1s')
--- init
main::scenario();
--- request
GET /metrics
--- response_body_like
(?m)^idempotency_wait_timeouts_total 1$
