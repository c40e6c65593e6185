# Idem/Upstream.pm — the counting upstream (scripts/upstream.pl) on a free
# loopback port, and its counts of executions. Core Perl only; does not
# need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Upstream;
#     Idem::Upstream::start_upstream();
#     my $n = Idem::Upstream::upstream_count('/pay/1');
#
# API (nothing is exported):
#   start_upstream()       starts scripts/upstream.pl (its log and state in
#                          the run's temp dir), waits for /_health; sets
#                          TEST_NGINX_UPSTREAM_PORT; returns the pid
#   upstream_port(), upstream_pid()
#   repo()                 the repository's root
#   upstream_count($path)  executions of $path so far
#   upstream_counts(@paths)
#                          { path => executions } for many paths at once
#                          (16 queries in flight; a failed query is asked
#                          again, within 60 s + 50 ms a path)
#   upstream_log()         its stdout so far ("execution N METHOD PATH?QUERY
#                          body=LEN" lines)
#   upstream_log_executions($prefix)
#                          the log's execution lines for paths starting
#                          with $prefix (a cross-check of the counts)
#   http_get($path)        GET $path from it: (status, body)

package Idem::Upstream;

use strict;
use warnings;

use Cwd qw(abs_path);
use Errno qw(EINTR);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Spec;
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time);

use Idem::Ports;
use Idem::Proc;
use Idem::Wait;

use constant {
    STARTUP_TIMEOUT => 10,
    IO_TIMEOUT      => 10,
};

my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..', '..'));
my $SCRIPT = "$REPO/scripts/upstream.pl";

my ($upstream_port, $upstream_pid);

sub start_upstream {
    my $tmp = Idem::Proc::tmpdir();
    my $log = "$tmp/upstream.log";
    my $state = "$tmp/upstream-state";
    make_path($state);
    for my $attempt (1 .. 3) {
        $upstream_port = Idem::Ports::free_port();
        $ENV{TEST_NGINX_UPSTREAM_PORT} = $upstream_port;
        $upstream_pid = Idem::Proc::spawn($log, $^X, $SCRIPT,
            '--listen', "127.0.0.1:$upstream_port", '--state-dir', $state);
        my $up = Idem::Wait::wait_until(sub {
            return 'dead' unless Idem::Proc::running($upstream_pid);
            my ($status, $body) = eval { http_get('/_health') };
            return defined $status && $status == 200 && $body eq 'ok' ? 'up' : 0;
        }, STARTUP_TIMEOUT) || 'timeout';
        return $upstream_pid if $up eq 'up';
        Idem::Proc::stop_pid($upstream_pid);
        $upstream_pid = undef;
        last if $up eq 'timeout';
    }
    die "Idem::Upstream: upstream.pl did not start on 127.0.0.1:$upstream_port\n" . Idem::Proc::log_tail($log);
}

sub repo          { $REPO }
sub upstream_port { $upstream_port }
sub upstream_pid  { $upstream_pid }

sub http_get {
    my ($path) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $upstream_port, Proto => 'tcp',
        Timeout => IO_TIMEOUT,
    ) or die "http_get: cannot connect to 127.0.0.1:$upstream_port: $!\n";
    $sock->autoflush(1);
    print {$sock} "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    my $buf = '';
    my $eof = 0;
    my $sel = IO::Select->new($sock);
    my $deadline = time + IO_TIMEOUT;
    until ($eof) {
        my $left = $deadline - time;
        die "http_get: timeout\n" if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($sock, $buf, 65536, length $buf);
        next if !defined $n && $! == EINTR;
        $eof = 1 unless $n;
    }
    close $sock;
    my ($status, $body) = $buf =~ m{\AHTTP/1\.[01] (\d{3})[^\n]*\n.*?\r?\n\r?\n(.*)\z}s
        or die "http_get: malformed response\n";
    return ($status, $body);
}

sub upstream_count {
    my ($path) = @_;
    $path = "/$path" unless $path =~ m{^/};
    my ($status, $body) = http_get("/_count$path");
    die "upstream_count: status $status\n" unless $status == 200;
    return $body + 0;
}

sub upstream_counts {
    my (@paths) = @_;
    require Idem::HTTP;
    my %count;
    my $p = Idem::HTTP::pool_new(concurrency => 16, on_done => sub {
        my ($req, $res, $pool) = @_;
        if (($res->{status} // 0) == 200 && $res->{body} =~ /^(\d+)$/) {
            $count{ $req->{count_path} } = $1;
        } else {
            Idem::HTTP::pool_submit($pool, $req, 0.1);
        }
    });
    Idem::HTTP::pool_submit($p, { port => $upstream_port, method => 'GET', path => "/_count$_", count_path => $_,
                                  close => 1 }) for @paths;
    Idem::HTTP::pool_run($p, time + 60 + 0.05 * @paths);
    my @missing = grep { !defined $count{$_} } @paths;
    die sprintf("Idem::Upstream: no count from the upstream for %d of %d paths (%s first)\n",
                scalar @missing, scalar @paths, $missing[0]) if @missing;
    return \%count;
}

sub upstream_log {
    open my $fh, '<', Idem::Proc::tmpdir() . '/upstream.log' or return '';
    local $/;
    return scalar <$fh>;
}

sub upstream_log_executions {
    my ($prefix) = @_;
    open my $fh, '<', Idem::Proc::tmpdir() . '/upstream.log' or return 0;
    my $n = 0;
    while (<$fh>) { $n++ if /^execution \d+ \S+ \Q$prefix\E/ }
    return $n;
}

1;
