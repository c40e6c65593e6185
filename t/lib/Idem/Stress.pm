# Idem/Stress.pm — what the stress and failure-injection files (stress/*.t,
# run by `make stress`) share: their setup (one redis-server with AOF, the
# counting upstream), the gateway's configuration, the clients that retry
# until 2xx, and a scenario's assertions and printed figures. Uses
# Test::More (the files are plain Test::More files) and the fixture modules.
#
#     use lib 't/lib';
#     use Test::More;
#     use Idem::Stress;
#     Idem::Stress::setup();
#     my $sc = Idem::Stress::scenario_begin('2', 'two gateways ...');
#     my $ng = Idem::Stress::gateway('s2a');
#     Idem::Stress::check($sc, $count == 1, 'one execution', "$count executions");
#     Idem::Nginx::nginx_stop($ng);
#     Idem::Stress::report_log($sc, $ng);
#     Idem::Stress::scenario_end($sc);
#     done_testing();
#
# Environment: STRESS_SCALE (in (0, 1], default 1: the sizes, scaled down
# for quick runs), STRESS_VERBOSE=1 (more progress lines), STRESS_KEEP=1
# (keep the temp dir), STRESS_TIME_LIMIT (seconds for a file, default 600),
# plus Idem::Nginx's (NGINX_BIN, STRESS_MODULE, STRESS_ASAN) and
# REDIS_SERVER. Printed lines are TAP comments (`prove -v` shows them).
#
# API (nothing is exported):
#   setup(%o)            temp dir, Redis (appendonly yes, everysec), the
#                        upstream, an alarm (STRESS_TIME_LIMIT); o{redis}
#                        => 0: no Redis (gateway() then needs its own store)
#   scaled($n, $min)     $n * STRESS_SCALE, at least $min
#   note(@text), vnote(@text)
#                        a progress line with the seconds since start;
#                        vnote only with STRESS_VERBOSE
#   gateway($name, %o)   an Idem::Nginx instance with the suite's config:
#                        Redis, zone "stress", upstream "payments", the
#                        scenario locations (/s1w0/ ... /s7w5/), /metrics,
#                        X-Idempotency-Status; o{workers}, o{main},
#                        o{http} (more in the http block), o{locations}
#                        (more), o{backend} (an nginx backend answering 201
#                        itself, for /s6/)
#   scenario_begin($id, $title), scenario_end($sc)
#                        scenario_end asserts that no sanitizer report was
#                        written and prints the scenario's figures
#                        (requests, executions, duplicates, answers, notes,
#                        duration); a failed scenario (or a file that
#                        died) keeps the temp dir
#   check($sc, $ok, $name, $why)
#                        one assertion ("$id: $name"); $why printed when it
#                        fails
#   fail_now($sc, $why)  a failing assertion (a bound reached in a callback)
#   report_log($sc, $ng, [$allowed])
#                        asserts no crash/alert line (but those matching
#                        $allowed, by default the handle's allowance:
#                        Idem::Nginx::allow_log, which nginx_stop's crash
#                        sentinel honours too); prints error/warn counts;
#                        returns (\@bad, \%errors)
#   answer_label($res), count_answer($sc, $res), answers_text(\%answers)
#   retryable($res), backoff($attempt)
#   keyed_load(%o)       keys POSTed until 2xx (retrying errors, 409, 429,
#                        502-504 with backoff): o{sc, keys ([{path, key,
#                        body, query}]), port, on_tick, max_attempts,
#                        key_time, time_limit, concurrency, timeout}
#   tally_executions($sc, \@keys)
#                        executions per key; asserts none twice and none
#                        answered 2xx without one
#   replay_check(%o)     every key once more (sc, keys, port, within):
#                        returns (\%tally, \@not_replayed, \@differ)
#   metrics_value($port, $line_prefix)
#                        a count from the gateway's metrics page
#   redis_port(), upstream_port(), tmpdir()

package Idem::Stress;

use strict;
use warnings;

use Test::More ();
use Time::HiRes qw(time);

use Idem::HTTP;
use Idem::Nginx;
use Idem::Proc;
use Idem::Redis;
use Idem::Upstream;

use constant CONCURRENCY => 32;

my $T0 = time;
my $SCALE = $ENV{STRESS_SCALE} // 1;
die "STRESS_SCALE must be in (0, 1]\n" unless $SCALE > 0 && $SCALE <= 1;

sub scaled { my ($n, $min) = @_; my $v = int($n * $SCALE + 0.5); return $v < $min ? $min : $v }
sub note   { Test::More::note(sprintf '  [%6.2fs] %s', time - $T0, join '', @_) }
sub vnote  { note(@_) if $ENV{STRESS_VERBOSE} }
sub say_   { Test::More::note(join '', @_) }

sub redis_port    { Idem::Redis::redis_port() }
sub upstream_port { Idem::Upstream::upstream_port() }
sub tmpdir        { Idem::Proc::tmpdir() }

sub setup {
    my (%o) = @_;
    my $limit = $ENV{STRESS_TIME_LIMIT} || 600;
    $SIG{ALRM} = sub { die "stress: the time limit of $limit s for this file was reached\n" };
    alarm $limit;
    $SIG{PIPE} = 'IGNORE';
    my $tmp = Idem::Proc::init(prefix => 'idempotency-stress');
    Idem::Proc::keep(1) if $ENV{STRESS_KEEP};
    my $module = Idem::Nginx::module_path();
    die "stress: $module is missing: build it first ("
        . (Idem::Nginx::asan() ? 'make test-asan' : 'make module') . ")\n" unless -f $module;
    say_('nginx-idempotency stress: nginx ', Idem::Nginx::nginx_bin(), ', ', Idem::Redis::find_redis_server(),
         ", module $module, scale $SCALE");
    say_("temp dir $tmp");
    if ($o{redis} // 1) {
        Idem::Redis::start_redis(args => ['--appendonly', 'yes', '--appendfsync', 'everysec', '--protected-mode', 'yes']);
        note('redis-server pid ', Idem::Redis::redis_pid(), ' on 127.0.0.1:', redis_port(), ' (appendonly yes)');
    }
    Idem::Upstream::start_upstream();
    note('upstream.pl pid ', Idem::Upstream::upstream_pid(), ' on 127.0.0.1:', upstream_port());
}

# ---------------------------------------------------------------- the gateway

my $LOCATIONS = <<'LOC';
        location /s1w0/ { idempotency on; proxy_pass http://payments; }
        location /s1w5/ { idempotency on; idempotency_wait 5s; proxy_pass http://payments; }
        location /s2/   { idempotency on; proxy_pass http://payments; }
        location /s3/   { idempotency on; proxy_pass http://payments; }
        location /s4/   { idempotency on; idempotency_lock_ttl 5s; proxy_pass http://payments; }
        location /s5/   { idempotency on; idempotency_lock_ttl 2s; proxy_pass http://payments; }
        location /s7w0/ { idempotency on; idempotency_store zone=stress; proxy_pass http://payments; }
        location /s7w5/ { idempotency on; idempotency_store zone=stress; idempotency_wait 5s; proxy_pass http://payments; }
LOC

sub gateway {
    my ($name, %o) = @_;
    my $http = sub {
        my ($ng) = @_;
        my $d = $ng->{dir};
        my $redis = redis_port() ? 'idempotency_redis 127.0.0.1:' . redis_port() . ';' : '';
        my $text = <<"HTTP";
    log_format stress '\$msec \$status \$idempotency_status "\$request" \$http_idempotency_key';
    log_format execution '\$msec \$request_uri';
    access_log $d/logs/access.log stress buffer=64k flush=1s;
    keepalive_requests 100000;
    keepalive_timeout 60s;
    $redis
    idempotency_zone zone=stress:16m;
    idempotency_scope "";               # one caller: the load generator
    upstream payments { server 127.0.0.1:@{[ upstream_port() ]}; }
@{[ $o{http} // '' ]}
HTTP
        return $text unless $o{backend};
        my ($port, $pad) = ($ng->{ports}[0], 'x' x 600);
        return $text . <<"BACKEND";
    upstream backend6 { server 127.0.0.1:$port; keepalive 32; }
    server {
        listen 127.0.0.1:$port;
        access_log $d/logs/backend.log execution buffer=64k;
        location / { return 201 '{"execution":"\$request_id","uri":"\$request_uri","pad":"$pad"}'; }
    }
BACKEND
    };
    my $s6 = !$o{backend} ? '' : <<'S6';
        location /s6/ {
            idempotency on;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend6;
        }
S6
    my $server = "        add_header X-Idempotency-Status \$idempotency_status always;\n"
               . "        location = /metrics { idempotency_metrics; }\n" . $LOCATIONS . $s6 . ($o{locations} // '');
    my $ng = Idem::Nginx::nginx_start($name, workers => $o{workers} // 2, main => $o{main},
                                      http => $http, server => $server, ports => $o{backend} ? 1 : 0);
    note("nginx $name: master $ng->{pid}, workers ", join(' ', Idem::Nginx::workers_of($ng->{pid})),
         ", 127.0.0.1:$ng->{port}");
    return $ng;
}

sub metrics_value {
    my ($port, $pattern) = @_;
    my $r = Idem::HTTP::http_once({ port => $port, method => 'GET', path => '/metrics', close => 1 }, 5);
    return undef unless ($r->{status} // 0) == 200;
    return $r->{body} =~ /^\Q$pattern\E (\d+)$/m ? $1 : undef;
}

# ---------------------------------------------------------------- results

sub scenario_begin {
    my ($id, $title) = @_;
    say_('');
    say_("== Scenario $id: $title");
    return { id => $id, title => $title, start => time, failures => [], answers => {},
             requests => 0, executions => 0, duplicates => 0, notes => [] };
}

sub check {
    my ($sc, $ok, $name, $why) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return 1 if $tb->ok($ok ? 1 : 0, "$sc->{id}: $name");
    push @{ $sc->{failures} }, $why // $name;
    note('FAIL: ', $why // $name);
    return 0;
}

sub fail_now {
    my ($sc, $why) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return check($sc, 0, $why, $why);
}

sub report_log {
    my ($sc, $ng, $allowed) = @_;
    my ($bad, $errors) = Idem::Nginx::log_findings($ng, $allowed // $ng->{log_allowed});
    for my $msg (sort { $errors->{$b} <=> $errors->{$a} } keys %$errors) {
        note("error log ($ng->{name}): $errors->{$msg} x $msg");
    }
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    check($sc, !@$bad, "no crash or alert in the error log of nginx $ng->{name}",
          "error log of nginx $ng->{name} has " . @$bad . " crash/alert line(s)");
    note("  $_") for @$bad[0 .. ($#$bad < 19 ? $#$bad : 19)];
    return ($bad, $errors);
}

sub answer_label {
    my ($res) = @_;
    if ($res->{error}) {
        my $e = $res->{error};
        return 'timeout' if $e =~ /^timeout/;
        return 'conn-refused' if $e =~ /refused/;
        return 'conn-error';
    }
    my $st = $res->{headers}{'x-idempotency-status'} // '';
    return $st ne '' ? "$res->{status}/$st" : "$res->{status}";
}

sub count_answer {
    my ($sc, $res) = @_;
    $sc->{requests}++;
    $sc->{answers}{ answer_label($res) }++;
}

sub answers_text {
    my ($answers) = @_;
    return join ', ', map { "$_: $answers->{$_}" }
        sort { $answers->{$b} <=> $answers->{$a} || $a cmp $b } keys %$answers;
}

# Each distinct sanitizer report (its error line and top frames, addresses
# aside) once, up to its SUMMARY line, with the processes that wrote it.
sub asan_check {
    my ($sc) = @_;
    my @reports = Idem::Nginx::asan_new_reports();
    my (%files, @order, %text);
    for my $r (@reports) {
        for my $one (split /(?=^=+\n==\d+==ERROR|^\S+:\d+:\d+: runtime error)/m, $r->[1]) {
            next unless $one =~ /ERROR|runtime error/;
            my @frames = $one =~ /^\s+#[0-3] 0x[0-9a-f]+ in (\S+)/mg;
            my ($what) = $one =~ /(ERROR: \S+: [\w-]+|runtime error: [^\n]*)/;
            my $sig = join ' ', $what // '?', @frames;
            push @order, $sig unless $files{$sig};
            push @{ $files{$sig} }, $r->[0] =~ s{.*/}{}r;
            ($text{$sig} //= $one) =~ s/(^SUMMARY:[^\n]*\n).*/$1/ms;
        }
    }
    check($sc, !@reports, 'no sanitizer report', scalar(@reports) . ' nginx process(es) wrote sanitizer reports ('
          . scalar(@order) . ' distinct), in ' . tmpdir() . '/asan');
    for my $sig (@order) {
        my %seen;
        my @f = grep { !$seen{$_}++ } @{ $files{$sig} };
        note('--- in ' . @f . " process(es) ($f[0]" . (@f > 1 ? ', ...' : '') . '):');
        note("  $_") for grep { /\S/ } split /\n/, $text{$sig};
    }
}

sub scenario_end {
    my ($sc) = @_;
    asan_check($sc);
    $sc->{duration} = time - $sc->{start};
    $sc->{ok} = !@{ $sc->{failures} };
    say_(sprintf '  requests %d, upstream executions %d, duplicate executions %d',
         $sc->{requests}, $sc->{executions}, $sc->{duplicates});
    say_('  answers: ', answers_text($sc->{answers}));
    say_("  $_") for @{ $sc->{notes} };
    say_(sprintf '  duration %.1f s: %s', $sc->{duration}, $sc->{ok} ? 'PASS' : 'FAIL');
    Idem::Proc::keep(1) unless $sc->{ok};     # the logs, for a look
}

# A file that failed or died keeps its temp dir too (runs before
# Idem::Proc's cleanup: END blocks run last defined first).
END { Idem::Proc::keep(1) if $? || !Test::More->builder->is_passing }

# ---------------------------------------------------------------- clients

# Retryable outcome for a client: connection problems and 409/429/502/503/504.
sub retryable {
    my ($res) = @_;
    return 1 if $res->{error};
    return $res->{status} =~ /^(?:409|429|502|503|504)$/;
}

sub backoff {
    my ($attempt) = @_;
    my $d = 0.05 * 2 ** ($attempt - 1);
    $d = 1 if $d > 1;
    return $d * (0.75 + rand 0.5);
}

sub keyed_load {
    my (%o) = @_;
    my $sc = $o{sc};
    my @keys = @{ $o{keys} };
    my $max_attempts = $o{max_attempts} // 60;
    my $key_time = $o{key_time} // 60;
    my %state = (done => 0, gave_up => 0, attempts => 0, retries => 0);
    my $p = Idem::HTTP::pool_new(
        concurrency => $o{concurrency} // CONCURRENCY,
        on_tick => $o{on_tick},
        on_done => sub {
            my ($req, $res, $pool) = @_;
            my $k = $req->{k};
            $state{attempts}++;
            count_answer($sc, $res);
            $k->{attempts}++;
            push @{ $k->{answers} }, answer_label($res);
            if (!retryable($res)) {
                $k->{final} = $res;
                $state{ $res->{status} =~ /^2/ ? 'done' : 'gave_up' }++;
                return;
            }
            if ($k->{attempts} >= $max_attempts || time - $k->{first} > $key_time) {
                $k->{final} = $res;
                $state{gave_up}++;
                return;
            }
            $state{retries}++;
            Idem::HTTP::pool_submit($pool, $req, backoff($k->{attempts}));
        },
    );
    for my $k (@keys) {
        Idem::HTTP::pool_submit($p, { port => $o{port}, method => 'POST', path => $k->{path} . ($k->{query} // ''),
                                      timeout => $o{timeout} // 10, k => $k, body => $k->{body},
                                      headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] });
        $k->{first} = time;
    }
    $state{completed} = Idem::HTTP::pool_run($p, time + ($o{time_limit} // 120));
    return \%state;
}

sub tally_executions {
    my ($sc, $keys) = @_;
    my $counts = Idem::Upstream::upstream_counts(map { $_->{path} } @$keys);
    my (@dups, $never);
    $never = 0;
    for my $k (@$keys) {
        my $c = $counts->{ $k->{path} };
        $k->{count} = $c;
        $sc->{executions} += $c;
        if ($c > 1) { $sc->{duplicates} += $c - 1; push @dups, $k }
        $never++ if $c == 0 && $k->{final} && ($k->{final}{status} // 0) =~ /^2/;
    }
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    check($sc, !@dups, 'no key executed more than once',
          scalar(@dups) . " keys executed more than once ($sc->{duplicates} duplicate executions)");
    for my $k (@dups[0 .. ($#dups < 9 ? $#dups : 9)]) {
        note("  duplicate: $k->{path} key $k->{key}: $k->{count} executions; client saw: @{ $k->{answers} // [] }");
    }
    check($sc, !$never, 'every key answered 2xx was executed', "$never keys got a 2xx but never reached the upstream");
    return \@dups;
}

sub replay_check {
    my (%o) = @_;
    my ($sc, $keys, $port) = @o{qw(sc keys port)};
    my $until = time + ($o{within} // 0);
    my %tally;
    my $p = Idem::HTTP::pool_new(
        concurrency => CONCURRENCY,
        on_done => sub {
            my ($req, $res, $pool) = @_;
            my $k = $req->{k};
            count_answer($sc, $res);
            if (retryable($res) && time < $until) {
                $k->{replay_retries}++;
                Idem::HTTP::pool_submit($pool, $req, 0.2);
                return;
            }
            my $label = answer_label($res);
            $label .= ' (Idempotent-Replayed)' if ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
            $tally{$label}++;
            $k->{replay} = $res;
        },
    );
    for my $k (@$keys) {
        Idem::HTTP::pool_submit($p, { port => $port, method => 'POST', path => $k->{path} . ($k->{query} // ''),
                                      timeout => 10, k => $k, body => $k->{body},
                                      headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] });
    }
    Idem::HTTP::pool_run($p, time + ($o{within} // 0) + 60);
    my @not = grep { !$_->{replay} || ($_->{replay}{headers}{'idempotent-replayed'} // '') ne 'true'
                     || $_->{replay}{status} !~ /^2/ } @$keys;
    my @differ = grep { $_->{replay} && $_->{final} && !$_->{final}{error}
                        && ($_->{replay}{body} // '') ne ($_->{final}{body} // '') } @$keys;
    return (\%tally, \@not, \@differ);
}

1;
