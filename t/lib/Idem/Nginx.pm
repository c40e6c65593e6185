# Idem/Nginx.pm — nginx instances outside Test::Nginx (the stress suite,
# benchmarks): written config, daemonized master (as in production: the
# binary upgrade needs it), started, reloaded and stopped by pid, with
# their error logs read. Optionally under ASan (STRESS_ASAN). Core Perl
# only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Nginx;
#     my $ng = Idem::Nginx::nginx_start('gw', workers => 2,
#         http => "upstream app { server 127.0.0.1:$port; }",
#         server => 'location / { idempotency on; proxy_pass http://app; }');
#     ... 127.0.0.1:$ng->{port} ...
#     Idem::Nginx::nginx_stop($ng);
#
# Environment: NGINX_BIN (default nginx from PATH, else /usr/sbin/nginx),
# STRESS_MODULE (the module; default build/ngx_http_idempotency_module.so,
# or build/asan/... with STRESS_ASAN=1), STRESS_ASAN=1 (every nginx runs
# with gcc's libasan preloaded, leak detection off, reports to asan/ in the
# temp dir; ASAN_RUNTIME overrides the runtime's path).
#
# API (nothing is exported):
#   nginx_bin(), module_path(), asan()   what is used (see above)
#   nginx_start($name, %o)
#                 writes $dir/nginx.conf (dir: nginx-$name in the temp dir)
#                 and starts it on a free port; waits until the master has
#                 its workers and GET /health answers 200. o{workers}
#                 (default 2), o{main} (main-context text), o{http} (http
#                 context text), o{server} (text in the server on the port;
#                 /health is there already), o{ports} (more free ports to
#                 pick, as $ng->{ports}[i] for o{http}/o{server} given as
#                 code refs), o{load_module} (default 1), o{log_allowed}
#                 (see allow_log). Returns a handle
#                 { name, dir, port, pid, workers, conf, error_log, ... }.
#   nginx_beside_test($name, %o)
#                 nginx_start for a gateway beside the one a Test::Nginx
#                 file runs: the nginx binary and the module under test
#                 (TEST_NGINX_BINARY, TEST_NGINX_MODULE), and under
#                 scripts/asan-suite.sh the ASan runtime, its reports
#                 written where the suite reads them (ASAN_LOG_DIR)
#   nginx_stop($ng)   QUIT, then TERM, then KILL, by pid; its workers too.
#                 Then the crash sentinel (Idem::CrashSentinel) reads the
#                 complete error log and the sanitizer reports of its
#                 processes: a crash (`exited on signal`), an `[alert]`, a
#                 report, a master gone before the stop or one that exited
#                 without removing its pid file fails a Test::More
#                 assertion (a warning outside a test), unless it matches
#                 the handle's allowance
#   allow_log($ng, $regex)
#                 what nginx_stop's check takes as expected for this
#                 gateway (a worker the test kills: its `exited on
#                 signal 9` line)
#   nginx_reload($ng, [$secs])
#                 SIGHUP; waits (default 15 s) until $ng->{workers} new
#                 workers run; returns (old workers, new workers) or ()
#   workers_of($master_pid)
#   new_log_lines($ng)  error log lines added since the last call
#   log_findings($ng, [$allowed])
#                 from the new lines: (\@bad, \%errors): crash or alert
#                 lines (not matching $allowed), and error/warn messages
#                 with digits as N, counted
#   asan_new_reports()  sanitizer reports written since the last call:
#                 [file, text] each

package Idem::Nginx;

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Spec;
use Time::HiRes qw(time);

use Idem::CrashSentinel;
use Idem::HTTP;
use Idem::Ports;
use Idem::Proc;
use Idem::Wait;

use constant STARTUP_TIMEOUT => 10;

my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..', '..'));
my @started;    # every instance (stopped at cleanup)

sub find_binary {
    my ($name, $fallback) = @_;
    if ($name =~ m{/}) {
        return File::Spec->rel2abs($name) if -x $name;
        die "Idem::Nginx: $name is not executable\n";
    }
    for my $dir (File::Spec->path) {
        return File::Spec->rel2abs("$dir/$name") if -x "$dir/$name" && !-d _;
    }
    return $fallback if defined $fallback && -x $fallback;
    die "Idem::Nginx: $name not found in PATH\n";
}

sub asan      { $ENV{STRESS_ASAN} ? 1 : 0 }
sub nginx_bin { find_binary($ENV{NGINX_BIN} || 'nginx', '/usr/sbin/nginx') }

sub module_path {
    return File::Spec->rel2abs($ENV{STRESS_MODULE}) if $ENV{STRESS_MODULE};
    return "$REPO/build/" . (asan() ? 'asan/' : '') . 'ngx_http_idempotency_module.so';
}

sub asan_runtime {
    my $rt = $ENV{ASAN_RUNTIME} || `gcc -print-file-name=libasan.so`;
    chomp $rt;
    die "Idem::Nginx: STRESS_ASAN: gcc's libasan.so not found (set ASAN_RUNTIME)\n" unless -e $rt;
    return $rt;
}

# gcc's ASan runtime preloaded into nginx (the packaged binary is not
# instrumented, the module is), as scripts/asan-nginx.sh does; each process
# logs to asan.<pid> / ubsan.<pid> in asan/, only if it has something to
# report (no exit statistics, no leak check: nginx leaks by design at exit).
sub asan_env {
    return {} unless asan();
    my $dir = Idem::Proc::tmpdir() . '/asan';
    make_path($dir);
    chmod 01777, $dir;    # workers run as another user when we are root
    return {
        LD_PRELOAD    => asan_runtime() . ($ENV{LD_PRELOAD} ? " $ENV{LD_PRELOAD}" : ''),
        ASAN_OPTIONS  => "log_path=$dir/asan:atexit=0:halt_on_error=0:detect_leaks=0:"
                       . 'fast_unwind_on_malloc=0:malloc_context_size=30' . ($ENV{ASAN_OPTIONS} ? ":$ENV{ASAN_OPTIONS}" : ''),
        UBSAN_OPTIONS => "log_path=$dir/ubsan:print_stacktrace=1:halt_on_error=0"
                       . ($ENV{UBSAN_OPTIONS} ? ":$ENV{UBSAN_OPTIONS}" : ''),
    };
}

my %asan_seen;
sub asan_new_reports {
    my $dir = Idem::Proc::tmpdir() . '/asan';
    my $dh;
    return () unless asan() && opendir($dh, $dir);
    my @new;
    for my $f (sort grep { /^(?:asan|ubsan)\.\d+$/ } readdir $dh) {
        my $path = "$dir/$f";
        my $size = -s $path // 0;
        next if $size <= ($asan_seen{$f} // 0);
        open my $fh, '<', $path or next;
        seek $fh, $asan_seen{$f} // 0, 0;
        local $/;
        my $text = <$fh> // '';
        $asan_seen{$f} = $size;
        push @new, [$path, $text] if $text =~ /\S/;
    }
    closedir $dh;
    return @new;
}

sub conf_text {
    my ($ng, %o) = @_;
    my $d = $ng->{dir};
    my ($http, $server) = map { ref $_ eq 'CODE' ? $_->($ng) : $_ // '' } @o{qw(http server)};
    my $load = ($o{load_module} // 1) ? 'load_module ' . module_path() . ';' : '';
    return <<"CONF";
# generated by t/lib/Idem/Nginx.pm
$load
master_process on;
daemon on;
worker_processes $ng->{workers};
worker_rlimit_nofile 8192;
@{[ $o{main} // '' ]}
error_log $d/logs/error.log notice;
pid $d/nginx.pid;

events { worker_connections 4096; }

http {
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
$http
    server {
        listen 127.0.0.1:$ng->{port};
        location = /health { return 200 "ok\\n"; }
$server
    }
}
CONF
}

sub nginx_start {
    my ($name, %o) = @_;
    my $dir = Idem::Proc::tmpdir() . "/nginx-$name";
    make_path("$dir/logs", "$dir/tmp");
    my $ng = {
        name => $name, dir => $dir, workers => $o{workers} // 2,
        port => Idem::Ports::free_port(), conf => "$dir/nginx.conf", error_log => "$dir/logs/error.log",
        pid_file => "$dir/nginx.pid", log_offset => 0, log_allowed => $o{log_allowed},
        ports => [ map { Idem::Ports::free_port() } 1 .. ($o{ports} // 0) ],
    };
    open my $fh, '>', $ng->{conf} or die "Idem::Nginx: $ng->{conf}: $!\n";
    print $fh conf_text($ng, %o);
    close $fh;
    # STRESS_ASAN: the master and every process it forks keep this environment.
    my $env = asan_env();
    # where its sanitizer reports go (the last log_path given wins)
    if (($env->{ASAN_OPTIONS} // '') =~ /.*\blog_path=([^:]+)/) {
        $ng->{asan_dir} = dirname($1);
    }
    my @env = sort keys %$env;
    local @ENV{@env} = @$env{@env};
    my $bin = nginx_bin();
    my $check = system { $bin } $bin, '-t', '-q', '-p', "$dir/", '-c', $ng->{conf};
    die "Idem::Nginx: nginx -t refused $ng->{conf}\n" if $check != 0;
    # daemon on, as nginx is run in production: the binary upgrade (USR2)
    # is ignored by a master whose parent is still the process that started it.
    my $starter = Idem::Proc::spawn("$dir/logs/stderr.log", $bin, '-p', "$dir/", '-c', $ng->{conf});
    push @started, $ng;
    my $deadline = time + STARTUP_TIMEOUT;
    Idem::Wait::wait_until(sub { !Idem::Proc::running($starter) }, STARTUP_TIMEOUT);
    Idem::Proc::stop_pid($starter) if Idem::Proc::running($starter);
    my $status = Idem::Proc::exit_status($starter);
    die "Idem::Nginx: nginx $name did not start (exit status " . ($status // '?') . "); see $dir/logs\n" if $status;
    Idem::Wait::wait_until(sub {
        open my $pf, '<', $ng->{pid_file} or return 0;
        ($ng->{pid}) = (<$pf> // '') =~ /^(\d+)/;
        return $ng->{pid};
    }, $deadline - time) or die "Idem::Nginx: nginx $name wrote no pid file; see $dir/logs\n";
    Idem::Proc::adopt($ng->{pid});
    my $up = Idem::Wait::wait_until(sub {
        return 'dead' unless Idem::Proc::running($ng->{pid});
        return 0 unless workers_of($ng->{pid}) >= $ng->{workers};
        my $r = Idem::HTTP::http_once({ port => $ng->{port}, method => 'GET', path => '/health' }, 2);
        return ($r->{status} // 0) == 200 ? 'up' : 0;
    }, $deadline - time) || 'timeout';
    die "Idem::Nginx: nginx $name exited at start; see $dir/logs\n" if $up eq 'dead';
    die "Idem::Nginx: nginx $name did not come up; see $dir/logs\n" if $up ne 'up';
    return $ng;
}

sub nginx_beside_test {
    my ($name, %o) = @_;
    my $logs = $ENV{ASAN_LOG_DIR};
    my $asan = ($ENV{TEST_NGINX_BINARY} // '') =~ /asan-nginx\.sh\z/ || $logs ? 1 : 0;
    local $ENV{STRESS_MODULE} = $ENV{TEST_NGINX_MODULE} if $ENV{TEST_NGINX_MODULE};
    local $ENV{STRESS_ASAN} = $asan;
    local $ENV{NGINX_BIN} = $asan ? $ENV{NGINX_BIN} : $ENV{TEST_NGINX_BINARY} || $ENV{NGINX_BIN};
    local $ENV{ASAN_OPTIONS} = $logs ? "log_path=$logs/asan:atexit=1:detect_leaks=1" : $ENV{ASAN_OPTIONS};
    local $ENV{UBSAN_OPTIONS} = $logs ? "log_path=$logs/ubsan" : $ENV{UBSAN_OPTIONS};
    return nginx_start($name, %o);
}

sub nginx_stop {
    my ($ng) = @_;
    return if $ng->{stopped};
    $ng->{stopped} = 1;
    my (@gone, @unclean);
    my @started = started_workers($ng);
    for my $pid (grep { $_ } ($ng->{pid}, $ng->{old_pid})) {
        if (!Idem::Proc::running($pid)) {
            # the old master of a binary upgrade is the test's to stop
            next unless $pid == $ng->{pid};
            push @gone, $pid;
            # workers it left behind (orphans: none of a live master)
            for my $w (@started) {
                my (undef, $ppid) = Idem::Proc::proc_stat($w);
                Idem::Proc::stop_pid($w, 'TERM', 2)
                    if Idem::Proc::running($w) && Idem::Proc::cmdline($w) =~ /^nginx: worker/
                       && Idem::Proc::cmdline($ppid // 0) !~ /^nginx: master/;
            }
            next;
        }
        my @workers = workers_of($pid);
        kill 'CONT', $pid;
        kill 'QUIT', $pid;
        if (Idem::Proc::wait_gone($pid, 5)) {
            Idem::Proc::forget($pid);
            # a master that exits cleanly removes its pid file
            push @unclean, $pid if grep { pid_in($_) == $pid } $ng->{pid_file}, "$ng->{pid_file}.oldbin";
        } else {
            Idem::Proc::stop_pid($pid, 'KILL', 5);
        }
        for my $w (@workers) {
            Idem::Proc::stop_pid($w, 'TERM', 2)
                if Idem::Proc::running($w) && Idem::Proc::cmdline($w) =~ /^nginx: worker/;
        }
    }
    Idem::CrashSentinel::gateway_stopped($ng, gone => \@gone, unclean => \@unclean,
                                         pids => [ grep { $_ } $ng->{pid}, $ng->{old_pid}, @started ]);
}

# Every worker its masters started, as they logged it (at notice).
sub started_workers {
    my ($ng) = @_;
    open my $fh, '<', $ng->{error_log} or return ();
    my %pids;
    while (my $line = <$fh>) { $pids{$1} = 1 if $line =~ /start (?:worker|cache \w+) process (\d+)/ }
    return sort { $a <=> $b } keys %pids;
}

sub pid_in {
    my ($file) = @_;
    open my $fh, '<', $file or return 0;
    return (<$fh> // '') =~ /^(\d+)/ ? $1 : 0;
}

sub allow_log { $_[0]{log_allowed} = $_[1] }

sub nginx_reload {
    my ($ng, $secs) = @_;
    my %old = map { $_ => 1 } workers_of($ng->{pid});
    kill 'HUP', $ng->{pid};
    my @new;
    Idem::Wait::wait_until(sub { (@new = grep { !$old{$_} } workers_of($ng->{pid})) >= $ng->{workers} }, $secs // 15)
        or return ();
    return ([sort { $a <=> $b } keys %old], \@new);
}

sub workers_of { Idem::Proc::children_of($_[0], qr/worker process/) }

sub new_log_lines {
    my ($ng) = @_;
    open my $fh, '<', $ng->{error_log} or return ();
    seek $fh, $ng->{log_offset}, 0;
    my @lines = <$fh>;
    $ng->{log_offset} = tell $fh;
    chomp @lines;
    return @lines;
}

sub log_findings {
    my ($ng, $allowed) = @_;
    my (@bad, %errors);
    for my $line (new_log_lines($ng)) {
        if ($line =~ /\[(?:alert|crit|emerg)\]|signal 11|core dumped|segfault/i) {
            push @bad, $line unless $allowed && $line =~ $allowed;
        } elsif ($line =~ /\[(error|warn)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client: .*)?$/) {
            (my $msg = "[$1] $2") =~ s/"idem:[0-9a-f]{64}"/"KEY"/g;   # one line per message, not per key
            $msg =~ s/\d+/N/g;
            $errors{$msg}++;
        }
    }
    return (\@bad, \%errors);
}

Idem::Proc::on_cleanup(sub { eval { nginx_stop($_) } for @started });

1;
