# Idem/Prometheus.pm — a real Prometheus server (Debian's `prometheus`)
# scraping a gateway's metrics page, and its HTTP API; the PromQL of the
# Grafana dashboard in contrib/grafana/. Core Perl and Idem::Proc,
# Idem::Ports, Idem::Wait only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Prometheus;
#     my $prom = Idem::Prometheus::start(dir => "$servroot/prometheus",
#                                        target => "127.0.0.1:$port");
#     my $v = Idem::Prometheus::value($prom, 'up');
#     Idem::Prometheus::stop($prom);
#
# API (nothing is exported):
#   start(%o)         writes prometheus.yml in o{dir} (created) and starts
#                     `prometheus` on a free 127.0.0.1 port, its TSDB in
#                     o{dir}/data, scraping http://o{target}o{path} (path
#                     default /metrics) as job o{job} (default "idempotency")
#                     every o{interval} (default 1s), evaluating o{rules}
#                     (rule files, absolute paths) as often; waits (20 s)
#                     until /-/ready answers 200. Dies when the binary is
#                     missing or it does not come up (with its log's tail).
#                     o{dir} is Prometheus's own: emptied first, removed
#                     when it stops (a Test::Nginx server root must hold
#                     only what Test::Nginx made, or the next file stops).
#                     Returns {pid, port, dir, log, job}
#   stop($prom)       stops it by pid (TERM, KILL after 5 s) and removes
#                     its dir; done at cleanup (Idem::Proc) if not before
#   api($prom, $path, %params)
#                     GET /api/v1/$path?params; the decoded answer's "data"
#                     (dies with Prometheus's error when status is not
#                     "success")
#   query($prom, $expr, [$time])
#                     an instant query (at $time, Unix seconds, when given):
#                     {resultType, result}
#   vector($prom, $expr, [$time])
#                     an instant vector's samples: a list of
#                     {metric => {labels}, value => number, time => seconds}
#   value($prom, $expr, [$time])
#                     the value of the only sample of an instant query,
#                     undef when there is none (dies on several)
#   dashboard_exprs($file, %vars)
#                     every `expr` of the Grafana dashboard $file (its
#                     panels, rows' panels included, and its query
#                     variables' queries that are PromQL), with the
#                     dashboard's variables replaced by %vars (name => text;
#                     $__rate_interval and $__interval default "1m"): a list
#                     of {panel, refId, expr}. Dies when $file is not
#                     well-formed JSON or a variable is left unreplaced.

package Idem::Prometheus;

use strict;
use warnings;

use File::Path qw(make_path remove_tree);
use HTTP::Tiny;
use JSON::PP ();

use Idem::Ports;
use Idem::Proc;
use Idem::Wait;

my $http = HTTP::Tiny->new(timeout => 10);

sub binary {
    for my $dir (split /:/, $ENV{PATH} // '') {
        return "$dir/prometheus" if -x "$dir/prometheus";
    }
    die "Idem::Prometheus: no prometheus binary in PATH (Debian's package prometheus: scripts/install-deps.sh)\n";
}

sub start {
    my (%o) = @_;
    my $bin = binary();
    my $dir = $o{dir} // die "Idem::Prometheus::start: dir is needed\n";
    my $target = $o{target} // die "Idem::Prometheus::start: target is needed\n";
    my $job = $o{job} // 'idempotency';
    my $interval = $o{interval} // '1s';
    remove_tree($dir);
    make_path("$dir/data");
    my $rules = join '', map { "  - $_\n" } @{ $o{rules} // [] };
    open my $fh, '>', "$dir/prometheus.yml" or die "Idem::Prometheus: $dir/prometheus.yml: $!\n";
    print {$fh} "global:\n  scrape_interval: $interval\n  scrape_timeout: $interval\n"
              . "  evaluation_interval: $interval\n"
              . ($rules ? "rule_files:\n$rules" : '')
              . "scrape_configs:\n  - job_name: $job\n    metrics_path: " . ($o{path} // '/metrics') . "\n"
              . "    static_configs:\n      - targets: ['$target']\n";
    close $fh;
    my $port = Idem::Ports::free_port();
    my $log = "$dir/prometheus.log";
    my $pid = Idem::Proc::spawn($log, $bin, "--config.file=$dir/prometheus.yml", "--storage.tsdb.path=$dir/data",
                                "--web.listen-address=127.0.0.1:$port", '--log.level=warn');
    my $prom = { pid => $pid, port => $port, dir => $dir, log => $log, job => $job };
    Idem::Proc::on_cleanup(sub { stop($prom) });
    my $ready = Idem::Wait::wait_until(sub {
        if (!Idem::Proc::running($pid)) {
            my $tail = Idem::Proc::log_tail($log);
            stop($prom);
            die "Idem::Prometheus: prometheus exited:\n$tail";
        }
        $http->get("http://127.0.0.1:$port/-/ready")->{status} == 200;
    }, 20);
    if (!$ready) {
        my $tail = Idem::Proc::log_tail($log);
        stop($prom);
        die "Idem::Prometheus: prometheus not ready within 20 s:\n$tail";
    }
    return $prom;
}

sub stop {
    my ($prom) = @_;
    Idem::Proc::stop_pid($prom->{pid});
    remove_tree($prom->{dir});
}

sub api {
    my ($prom, $path, %params) = @_;
    my $url = "http://127.0.0.1:$prom->{port}/api/v1/$path";
    $url .= '?' . $http->www_form_urlencode(\%params) if %params;
    my $res = $http->get($url);
    my $body = eval { JSON::PP::decode_json($res->{content}) };
    die "Idem::Prometheus: GET /api/v1/$path: $res->{status} $res->{content}\n"
        unless $body && ($body->{status} // '') eq 'success';
    return $body->{data};
}

sub query {
    my ($prom, $expr, $time) = @_;
    return api($prom, 'query', query => $expr, defined $time ? (time => $time) : ());
}

sub vector {
    my ($prom, $expr, $time) = @_;
    my $data = query($prom, $expr, $time);
    die "Idem::Prometheus: $expr: a $data->{resultType}, not a vector\n" unless $data->{resultType} eq 'vector';
    return map { { metric => $_->{metric}, time => $_->{value}[0], value => 0 + $_->{value}[1] } }
               @{ $data->{result} };
}

sub value {
    my ($prom, $expr, $time) = @_;
    my @samples = vector($prom, $expr, $time);
    die "Idem::Prometheus: $expr: " . scalar(@samples) . " samples, not one\n" if @samples > 1;
    return @samples ? $samples[0]{value} : undef;
}

# ---------------------------------------------------------------- Grafana

sub dashboard_exprs {
    my ($file, %vars) = @_;
    $vars{__rate_interval} //= '1m';
    $vars{__interval} //= '1m';
    open my $fh, '<', $file or die "Idem::Prometheus: $file: $!\n";
    my $dashboard = eval { JSON::PP->new->relaxed(0)->decode(do { local $/; <$fh> }) }
        or die "Idem::Prometheus: $file is not well-formed JSON: $@";
    my @found;
    my $walk;
    $walk = sub {
        for my $panel (@_) {
            for my $target (@{ $panel->{targets} // [] }) {
                push @found, { panel => $panel->{title}, refId => $target->{refId}, expr => $target->{expr} };
            }
            $walk->(@{ $panel->{panels} // [] });
        }
    };
    $walk->(@{ $dashboard->{panels} // [] });
    for my $var (@{ $dashboard->{templating}{list} // [] }) {
        next unless ($var->{type} // '') eq 'query';
        my $q = ref $var->{query} ? $var->{query}{query} : $var->{query};
        # label_values(METRIC{...}, LABEL) is Grafana's; its selector is PromQL
        $q = $1 if $q =~ /^label_values\((.*),\s*\w+\)$/s;
        push @found, { panel => "variable $var->{name}", refId => '-', expr => $q };
    }
    for my $e (@found) {
        $e->{expr} =~ s/\$\{?(\w+)\}?/exists $vars{$1} ? $vars{$1} : die "Idem::Prometheus: $file: \$$1 in \"$e->{panel}\" has no value\n"/ge;
    }
    return @found;
}

1;
