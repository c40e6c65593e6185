#!/usr/bin/env perl
# stress.pl — stress and failure-injection runs for ngx_http_idempotency_module
# (what `make stress` runs).
#
#   perl scripts/stress.pl [--scenarios 1,2,3,4,5,6,7,8,9,10,11] [--scale F] [--keep] [--verbose]
#
# Starts everything it needs itself, on free 127.0.0.1 ports, in a temp dir:
# one redis-server, the counting upstream (scripts/upstream.pl) and, per
# scenario, one or two nginx instances (master_process on, worker_processes 2,
# or 1 for the memory scenario) loading build/ngx_http_idempotency_module.so.
# It stops only the processes it started, by pid, and exits non-zero when a
# guarantee is violated:
#
#   1  200 simultaneous POSTs with one key against a slow upstream, with
#      idempotency_wait 0 (1a) and 5s (1b): one execution, every other answer
#      the identical replay (or 409 with wait 0).
#   2  two gateways sharing one Redis race on the same 50 keys: one
#      execution per key.
#   3  2000 keys retried by clients until 2xx while Redis is paused
#      (SIGSTOP/SIGCONT), Redis is restarted (same port, AOF on) and nginx is
#      reloaded (SIGHUP): one execution per key; then every key replays.
#   4  binary upgrade under load (USR2, WINCH, QUIT): no crash, no duplicate,
#      no stuck claim (every key replays within idempotency_lock_ttl).
#   5  the worker running a request is SIGKILLed: the claim stays (409) and
#      expires after idempotency_lock_ttl (2s), then a retry executes.
#   6  memory: 100000 requests (new keys, replays, no key) to a gateway with
#      worker_processes 1: the worker's VmRSS after 1k/10k/50k/100k must not
#      grow more than 20% between 10k and 100k.
#   7  scenario 1 (7a: wait 0, 7b: wait 5s) against the shared memory zone
#      store (idempotency_store zone=stress) instead of Redis, across the
#      two workers: one execution.
#   8  3000 keys, clients retry until 2xx, through a Redis Cluster of 3
#      masters with a replica each, while a master fails over to its replica
#      (CLUSTER FAILOVER) and then, once every node agrees that it has, 1000
#      slots move between the two other masters (redis-cli --cluster
#      reshard; a refused reshard runs again for the slots left, 3 runs in
#      60 s at most): one execution per key; then every key replays.
#   9  2000 keys, clients retry until 2xx, through Redis Sentinel (a master,
#      a replica, one sentinel) while the master fails over (writes paused
#      on it, SENTINEL FAILOVER): one execution per key; every key replays.
#  10  1500 keys, each POSTed once and retried once idempotency_lock_ttl
#      (4s) + 1 s after its answer, concurrency 16, while a fault proxy
#      between nginx and Redis drops replies, stalls them past
#      idempotency_redis_timeout (300ms) or cuts the connection mid-reply,
#      and nginx is reloaded (SIGHUP) 5 times during the faults
#      (worker_shutdown_timeout 5s; the old workers must be gone within it
#      + 3 s). No worker crash or alert; at most one execution per key; a
#      first attempt gets its execution or 503, a retry a replay, 409, 410,
#      503 or the key's first execution; once every claim has expired or
#      been resolved in Redis, each key once more: the same.
#  11  scenario 1 (11a: wait 0, 11b: wait 5s) against a second redis-server
#      reached over TLS (idempotency_redis ... ssl, its certificate checked
#      against a CA made here with openssl): one execution, the response
#      stored in that Redis, no TLS failure counted.
#
# Environment: NGINX_BIN (default: nginx from PATH, else /usr/sbin/nginx; an
# absolute path is needed for the binary upgrade), REDIS_SERVER (default
# redis-server from PATH), STRESS_MODULE (the module to load; default
# build/ngx_http_idempotency_module.so), STRESS_ASAN=1 (the module built with
# AddressSanitizer and UndefinedBehaviorSanitizer, by default
# build/asan/ngx_http_idempotency_module.so, which `make test-asan` builds;
# every nginx then runs with gcc's libasan preloaded, as
# scripts/asan-nginx.sh does, with leak detection off; its reports go to
# asan/ in the temp dir, and a scenario during which one appeared fails and
# prints it).
#
# Core Perl modules only. Every loop is bounded in count and time; nothing
# listens or connects beyond 127.0.0.1.

use strict;
use warnings;

use Cwd qw(abs_path);
use Errno qw(EINTR EAGAIN EWOULDBLOCK EINPROGRESS);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use File::Basename qw(dirname);
use File::Path qw(make_path remove_tree);
use File::Spec;
use File::Temp qw(tempdir);
use Getopt::Long qw(GetOptions);
use IO::Socket::INET;
use POSIX qw(WNOHANG strerror);
use Socket qw(PF_INET SOCK_STREAM IPPROTO_TCP SOL_SOCKET SO_ERROR TCP_NODELAY AF_UNIX PF_UNSPEC
              pack_sockaddr_in inet_aton);
use Time::HiRes qw(time sleep);

$| = 1;

# ---------------------------------------------------------------- options

my %opt = (scenarios => '1,2,3,4,5,6,7,8,9,10,11', scale => 1, keep => 0, verbose => 0);
GetOptions(
    'scenarios=s' => \$opt{scenarios},
    'scale=f'     => \$opt{scale},
    'keep'        => \$opt{keep},
    'verbose'     => \$opt{verbose},
) or die "usage: $0 [--scenarios 1,2,...] [--scale F] [--keep] [--verbose]\n";
die "--scale must be in (0, 1]\n" unless $opt{scale} > 0 && $opt{scale} <= 1;
my %want = map { $_ => 1 } split /,/, $opt{scenarios};

my $REPO   = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..'));
my $ASAN   = $ENV{STRESS_ASAN} ? 1 : 0;
my $MODULE = $ENV{STRESS_MODULE} ? File::Spec->rel2abs($ENV{STRESS_MODULE})
           : "$REPO/build/" . ($ASAN ? 'asan/' : '') . 'ngx_http_idempotency_module.so';
my $UPSTREAM_SCRIPT = "$REPO/scripts/upstream.pl";
my $NGINX  = find_binary($ENV{NGINX_BIN} || 'nginx', '/usr/sbin/nginx');
my $REDIS  = find_binary($ENV{REDIS_SERVER} || 'redis-server');
(my $REDIS_CLI = $REDIS) =~ s/redis-server$/redis-cli/;
die "stress.pl: $MODULE is missing: build it first (" . ($ASAN ? 'make test-asan' : 'make module') . ")\n"
    unless -f $MODULE;
my $ASAN_RUNTIME = $ASAN ? ($ENV{ASAN_RUNTIME} || `gcc -print-file-name=libasan.so`) : '';
chomp $ASAN_RUNTIME;
die "stress.pl: STRESS_ASAN: gcc's libasan.so not found (set ASAN_RUNTIME)\n" if $ASAN && !-e $ASAN_RUNTIME;

# Sizes (scaled down by --scale for quick runs).
sub scaled { my ($n, $min) = @_; my $v = int($n * $opt{scale} + 0.5); return $v < $min ? $min : $v }
my $S1_REQUESTS   = scaled(200, 20);
my $S2_KEYS       = scaled(50, 5);
my $S2_PER_GW     = 4;              # requests per key and gateway, per round
my $S3_KEYS       = scaled(2000, 100);
my $S4_KEYS       = scaled(800, 100);
my $S6_REQUESTS   = scaled(100_000, 2000);
my $S8_KEYS       = scaled(3000, 300);
my $S8_SLOTS      = scaled(1000, 100);
my $S9_KEYS       = scaled(2000, 200);
my $S10_KEYS      = scaled(1500, 150);
my $CONCURRENCY   = 32;

use constant {
    STARTUP_TIMEOUT => 10,
    STOP_TIMEOUT    => 5,
    REQUEST_TIMEOUT => 15,
    S6_TIME_LIMIT   => 100,     # seconds for the memory scenario's requests
    S8_SETTLE_TIMEOUT => 30,    # seconds for a Redis Cluster to settle (created, failed over)
    S8_RESHARD_TRIES  => 3,     # redis-cli --cluster reshard runs at most, a refused one retried
    S8_RESHARD_TIME   => 60,    # seconds for them all, waits for the cluster to settle included
    RSS_GROWTH_MAX  => 0.20,
    S10_REDIS_TIMEOUT => 300,   # ms, idempotency_redis_timeout
    S10_LOCK_TTL      => 4,     # s, idempotency_lock_ttl
    S10_SHUTDOWN      => 5,     # s, worker_shutdown_timeout
    S10_STALL         => 800,   # ms a stalled reply is held
    S10_FAULT_AFTER   => 1.2,   # s a fault goes on after the SIGHUP
    S10_CONCURRENCY   => 16,
    S10_LOAD_LIMIT    => 120,   # s for the load and the reloads
    S10_TIME_LIMIT    => 180,   # s for the whole scenario
};

sub find_binary {
    my ($name, $fallback) = @_;
    if ($name =~ m{/}) {
        return File::Spec->rel2abs($name) if -x $name;
        die "stress.pl: $name is not executable\n";
    }
    for my $dir (File::Spec->path) {
        # not abs_path: redis-server is a symlink whose name selects its mode
        return File::Spec->rel2abs("$dir/$name") if -x "$dir/$name" && !-d _;
    }
    return $fallback if defined $fallback && -x $fallback;
    die "stress.pl: $name not found in PATH\n";
}

# ---------------------------------------------------------------- output

my $T0 = time;
sub say_ { print @_, "\n" }
sub note { printf "  [%6.2fs] %s\n", time - $T0, join '', @_ }
sub vnote { note(@_) if $opt{verbose} }

# ---------------------------------------------------------------- processes

my $TMP;            # the run's temp dir
my %CHILD;          # pid => name: our direct children, not yet reaped
my %EXIT;           # pid => wait status of reaped children
my %OWNED;          # pid => name: every process we started (cleanup list)
my %ports_taken;

sub free_port {
    for (1 .. 50) {
        my $sock = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1, ReuseAddr => 1,
        ) or die "stress.pl: cannot bind 127.0.0.1:0: $!\n";
        my $port = $sock->sockport;
        close $sock;
        next if $ports_taken{$port}++;
        return $port;
    }
    die "stress.pl: no free port\n";
}

sub spawn {
    my ($name, $log, @cmd) = @_;
    my $pid = fork;
    die "stress.pl: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP PIPE ALRM);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $log or POSIX::_exit(127);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(127);
        exec { $cmd[0] } @cmd or do { print STDERR "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }
    $CHILD{$pid} = $OWNED{$pid} = $name;
    return $pid;
}

sub reap {
    while ((my $pid = waitpid(-1, WNOHANG)) > 0) {
        $EXIT{$pid} = $?;
        delete $CHILD{$pid};
    }
}

# True while $pid runs (our child, or a process we adopted such as an
# upgraded nginx master); zombies count as gone.
sub running {
    my ($pid) = @_;
    return 0 unless $pid;
    reap();
    return 1 if exists $CHILD{$pid};
    return 0 if exists $EXIT{$pid};
    return 0 unless kill 0, $pid;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $stat = <$fh> // '';
    return $stat =~ /\)\s+[ZX]\s/ ? 0 : 1;
}

sub wait_gone {
    my ($pid, $secs) = @_;
    my $deadline = time + $secs;
    sleep 0.02 while running($pid) && time < $deadline;
    return !running($pid);
}

# Stops one process we started: $signal, then KILL after STOP_TIMEOUT.
sub stop_pid {
    my ($pid, $signal, $timeout) = @_;
    return 1 unless $pid;
    if (running($pid)) {
        kill 'CONT', $pid;     # a paused Redis must be able to act on TERM
        kill $signal // 'TERM', $pid;
        if (!wait_gone($pid, $timeout // STOP_TIMEOUT)) {
            kill 'KILL', $pid;
            wait_gone($pid, 2);
        }
    }
    delete $OWNED{$pid};
    return 1;
}

sub proc_stat {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return;
    my $stat = <$fh> // return;
    my ($rest) = $stat =~ /\)\s+(.*)$/s or return;
    my @f = split ' ', $rest;      # state ppid ...
    return ($f[0], $f[1]);
}

sub cmdline {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return '';
    local $/;
    my $c = <$fh> // '';
    $c =~ s/\0+/ /g;
    $c =~ s/\s+$//;
    return $c;
}

# Children of $pid whose command line matches $re (nginx renames its processes).
sub children_of {
    my ($pid, $re) = @_;
    my @kids;
    opendir my $dh, '/proc' or return;
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my ($state, $ppid) = proc_stat($p);
        next unless defined $ppid && $ppid == $pid && $state ne 'Z';
        next if defined $re && cmdline($p) !~ $re;
        push @kids, $p + 0;
    }
    closedir $dh;
    @kids = sort { $a <=> $b } @kids;
    return wantarray ? @kids : scalar @kids;
}

sub workers_of { children_of($_[0], qr/worker process/) }

sub vm_rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)\s+kB/ }
    return;
}

my $cleaned = 0;
my @NGINX_ALL;      # every nginx instance started (for cleanup)

sub cleanup {
    return if $cleaned;
    $cleaned = 1;
    local ($?, $!, $@);
    for my $ng (@NGINX_ALL) { eval { nginx_stop($ng, 1) } }
    for my $pid (sort { $a <=> $b } keys %OWNED) { stop_pid($pid) }
    if (defined $TMP && -d $TMP) {
        if ($opt{keep}) { say_("temp dir kept: $TMP") }
        else { remove_tree($TMP) }
    }
}

my $main_pid = $$;
for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub {
        exit(1) if $$ != $main_pid;
        say_("\nstress.pl: SIG$sig, stopping what was started");
        cleanup();
        exit(130);
    };
}
$SIG{PIPE} = 'IGNORE';
$SIG{ALRM} = sub { die "stress.pl: overall time limit reached\n" };
END { cleanup() if $$ == $main_pid }

# ---------------------------------------------------------------- HTTP client
#
# A request is a hash: port, method, path, headers ([[name, value], ...]),
# body, timeout, plus whatever fields the scenario keeps in it. A result is
# a hash: status, headers (lower-cased name => value, repeated ones joined),
# body, or error (connect/read/timeout/closed), plus elapsed.

sub request_bytes {
    my ($r) = @_;
    my $body = $r->{body} // '';
    my $s = "$r->{method} $r->{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    $s .= "$_->[0]: $_->[1]\r\n" for @{ $r->{headers} // [] };
    $s .= 'Content-Length: ' . length($body) . "\r\n" if $r->{method} ne 'GET' || length $body;
    $s .= "Connection: close\r\n" if $r->{close};
    return "$s\r\n$body";
}

# Parses one response off the front of $$buf; undef when incomplete.
sub parse_response {
    my ($buf, $eof, $method) = @_;
    for (1 .. 5) {      # skips interim 1xx responses
        my $hend = index($$buf, "\r\n\r\n");
        return undef if $hend < 0;
        my ($status_line, @lines) = split /\r\n/, substr($$buf, 0, $hend);
        my ($version, $status) = ($status_line // '') =~ m{^HTTP/(1\.[01]) (\d{3})}
            or return { error => 'malformed status line' };
        my (%h, @list);
        for my $line (@lines) {
            my ($k, $v) = $line =~ /^([^:]+):\s*(.*?)\s*$/ or next;
            push @list, [$k, $v];
            my $lk = lc $k;
            $h{$lk} = exists $h{$lk} ? "$h{$lk}, $v" : $v;
        }
        my $pos = $hend + 4;
        if ($status < 200) { substr($$buf, 0, $pos, ''); next }
        my $conn = lc($h{connection} // '');
        my $keepalive = $version eq '1.1' ? $conn !~ /close/ : $conn =~ /keep-alive/;
        my $body = '';
        if ($method eq 'HEAD' || $status == 204 || $status == 304) {
            # no body
        } elsif (lc($h{'transfer-encoding'} // '') =~ /chunked/) {
            my $p = $pos;
            for (my $guard = 0; ; $guard++) {
                return { error => 'too many chunks' } if $guard > 100_000;
                my $le = index($$buf, "\r\n", $p);
                return undef if $le < 0;
                my ($hex) = substr($$buf, $p, $le - $p) =~ /^([0-9a-fA-F]+)/
                    or return { error => 'malformed chunk' };
                my $size = hex $hex;
                $p = $le + 2;
                if ($size == 0) {
                    for (1 .. 100) {
                        my $te = index($$buf, "\r\n", $p);
                        return undef if $te < 0;
                        my $empty = $te == $p;
                        $p = $te + 2;
                        last if $empty;
                    }
                    last;
                }
                return undef if length($$buf) < $p + $size + 2;
                $body .= substr($$buf, $p, $size);
                $p += $size + 2;
            }
            $pos = $p;
        } elsif (defined $h{'content-length'}) {
            my $cl = $h{'content-length'};
            return { error => 'bad content-length' } unless $cl =~ /^\d+$/;
            return undef if length($$buf) < $pos + $cl;
            $body = substr($$buf, $pos, $cl);
            $pos += $cl;
        } else {
            return undef unless $eof;
            $body = substr($$buf, $pos);
            $pos = length $$buf;
            $keepalive = 0;
        }
        substr($$buf, 0, $pos, '');
        return { status => $status + 0, headers => \%h, hlist => \@list, body => $body,
                 keepalive => $keepalive };
    }
    return { error => 'too many interim responses' };
}

sub new_conn {
    my ($port) = @_;
    socket(my $s, PF_INET, SOCK_STREAM, 0) or return (undef, "socket: $!");
    my $flags = fcntl($s, F_GETFL, 0);
    fcntl($s, F_SETFL, $flags | O_NONBLOCK) or return (undef, "fcntl: $!");
    setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
    my $c = { sock => $s, fd => fileno($s), port => $port, state => 'connecting', uses => 0 };
    if (connect($s, pack_sockaddr_in($port, inet_aton('127.0.0.1')))) {
        $c->{state} = 'writing';
    } elsif ($! != EINPROGRESS) {
        my $e = "$!";
        close $s;
        return (undef, "connect: $e");
    }
    return ($c, undef);
}

# A pool runs requests with at most `concurrency` in flight, over keep-alive
# connections. on_done($req, $res, $pool) may submit more (retries, with a
# delay); feed() hands out new requests until it returns undef; on_tick($pool)
# runs every loop turn and returns true while it still has work of its own.
sub pool_new {
    my (%o) = @_;
    return {
        conc => $o{concurrency} // $CONCURRENCY, ready => [], delayed => [],
        conns => {}, idle => {}, nactive => 0, on_done => $o{on_done},
        feed => $o{feed}, on_tick => $o{on_tick}, fed_all => !$o{feed},
        started => 0, completed => 0,
    };
}

sub pool_submit {
    my ($p, $req, $delay) = @_;
    if ($delay && $delay > 0) {
        my $at = time + $delay;
        $req->{not_before} = $at;
        my $d = $p->{delayed};
        my ($lo, $hi) = (0, scalar @$d);        # sorted insert
        while ($lo < $hi) {
            my $mid = int(($lo + $hi) / 2);
            if ($d->[$mid]{not_before} <= $at) { $lo = $mid + 1 } else { $hi = $mid }
        }
        splice @$d, $lo, 0, $req;
    } else {
        push @{ $p->{ready} }, $req;
    }
}

sub conn_close {
    my ($p, $c) = @_;
    delete $p->{conns}{ $c->{fd} };
    $c->{state} = 'closed';
    close $c->{sock};
}

sub req_finish {
    my ($p, $c, $req, $res) = @_;
    if ($c) {
        $p->{nactive}--;
        $c->{req} = undef;
        if ($res->{error} || !$res->{keepalive} || length $c->{rbuf}) {
            conn_close($p, $c);
        } else {
            $c->{state} = 'idle';
            push @{ $p->{idle}{ $c->{port} } }, $c;
        }
    }
    $res->{elapsed} = time - $req->{sent_at};
    $res->{done_at} = time;
    $p->{completed}++;
    $p->{on_done}->($req, $res, $p) if $p->{on_done};
}

sub req_fail {
    my ($p, $c, $why) = @_;
    my $req = $c->{req};
    req_finish($p, $c, $req, { error => $why });
}

sub req_start {
    my ($p, $req) = @_;
    $req->{sent_at} = time;
    $p->{started}++;
    my $c;
    my $idle = $p->{idle}{ $req->{port} } //= [];
    while (my $ic = pop @$idle) {
        if ($ic->{state} eq 'idle') { $c = $ic; last }
    }
    if (!$c) {
        my $err;
        ($c, $err) = new_conn($req->{port});
        if (!$c) {
            req_finish($p, undef, $req, { error => $err });
            return;
        }
        $p->{conns}{ $c->{fd} } = $c;
    } else {
        $c->{state} = 'writing';
    }
    $p->{nactive}++;
    $c->{reused}   = $c->{uses}++ > 0;
    $c->{req}      = $req;
    $c->{wbuf}     = request_bytes($req);
    $c->{rbuf}     = '';
    $c->{deadline} = time + ($req->{timeout} // REQUEST_TIMEOUT);
    conn_write($p, $c) if $c->{state} eq 'writing';
}

sub conn_write {
    my ($p, $c) = @_;
    if ($c->{state} eq 'connecting') {
        my $err = unpack 'i', getsockopt($c->{sock}, SOL_SOCKET, SO_ERROR) // pack('i', 0);
        return req_fail($p, $c, 'connect: ' . strerror($err)) if $err;
        $c->{state} = 'writing';
    }
    while (length $c->{wbuf}) {
        my $n = syswrite($c->{sock}, $c->{wbuf});
        if (!defined $n) {
            return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
            return req_fail($p, $c, "write: $!" . ($c->{reused} ? ' (reused connection)' : ''));
        }
        substr($c->{wbuf}, 0, $n, '');
    }
    $c->{state} = 'reading';
}

sub conn_read {
    my ($p, $c) = @_;
    my $n = sysread($c->{sock}, $c->{rbuf}, 65536, length $c->{rbuf});
    if (!defined $n) {
        return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
        return conn_close($p, $c) if $c->{state} eq 'idle';
        return req_fail($p, $c, "read: $!" . ($c->{reused} && $c->{rbuf} eq '' ? ' (reused connection)' : ''));
    }
    if ($c->{state} eq 'idle') {    # the server closed an idle connection
        return conn_close($p, $c);
    }
    my $eof = $n == 0;
    my $res = parse_response(\$c->{rbuf}, $eof, $c->{req}{method});
    if ($res) {
        $res->{keepalive} = 0 if $eof;
        return req_finish($p, $c, $c->{req}, $res);
    }
    if ($eof) {
        return req_fail($p, $c, 'closed before a response'
            . ($c->{reused} && $c->{rbuf} eq '' ? ' (reused connection)' : ''));
    }
}

# Runs the pool until all work is done (returns 1) or $deadline (returns 0,
# aborting what is in flight).
sub pool_run {
    my ($p, $deadline) = @_;
    my $rin_template;
    while (1) {
        my $now = time;
        my $d = $p->{delayed};
        push @{ $p->{ready} }, shift @$d while @$d && $d->[0]{not_before} <= $now;
        while ($p->{nactive} < $p->{conc}) {
            my $req = shift @{ $p->{ready} };
            if (!$req && !$p->{fed_all}) {
                $req = $p->{feed}->($p);
                $p->{fed_all} = 1 unless $req;
            }
            last unless $req;
            req_start($p, $req);
        }
        my $busy = $p->{on_tick} ? $p->{on_tick}->($p) : 0;
        if (!$busy && !$p->{nactive} && !@{ $p->{ready} } && !@$d && $p->{fed_all}) {
            for my $c (values %{ $p->{conns} }) { conn_close($p, $c) }
            return 1;
        }
        if ($now > $deadline) {
            for my $c (values %{ $p->{conns} }) {
                if ($c->{req}) { req_fail($p, $c, 'aborted at the time limit') }
                else { conn_close($p, $c) }
            }
            return 0;
        }

        my ($rin, $win) = ('', '');
        my $any = 0;
        for my $c (values %{ $p->{conns} }) {
            my $st = $c->{state};
            if ($st eq 'reading' || $st eq 'idle') { vec($rin, $c->{fd}, 1) = 1; $any = 1 }
            elsif ($st eq 'connecting' || $st eq 'writing') { vec($win, $c->{fd}, 1) = 1; $any = 1 }
        }
        my $timeout = 0.02;
        $timeout = 0 if @{ $p->{ready} } && $p->{nactive} < $p->{conc};
        if (@$d) {
            my $until = $d->[0]{not_before} - time;
            $timeout = $until if $until < $timeout;
            $timeout = 0 if $timeout < 0;
        }
        if (!$any) { sleep $timeout if $timeout > 0; next }
        my ($rout, $wout) = ($rin, $win);
        my $n = select($rout, $wout, undef, $timeout);
        $now = time;
        if ($n > 0) {
            for my $c (values %{ $p->{conns} }) {
                next if $c->{state} eq 'closed';
                if (($c->{state} eq 'connecting' || $c->{state} eq 'writing') && vec($wout, $c->{fd}, 1)) {
                    conn_write($p, $c);
                } elsif (($c->{state} eq 'reading' || $c->{state} eq 'idle') && vec($rout, $c->{fd}, 1)) {
                    conn_read($p, $c);
                }
            }
        }
        for my $c (values %{ $p->{conns} }) {
            next unless $c->{req} && $c->{state} ne 'closed';
            req_fail($p, $c, 'timeout') if $now > $c->{deadline};
        }
    }
}

# One request, synchronously (through a pool of one).
sub http_once {
    my ($req, $timeout) = @_;
    my $res;
    my $p = pool_new(concurrency => 1, on_done => sub { $res = $_[1] });
    $req->{timeout} //= $timeout // REQUEST_TIMEOUT;
    pool_submit($p, $req);
    pool_run($p, time + ($timeout // REQUEST_TIMEOUT) + 1);
    return $res // { error => 'no response' };
}

# A count from the gateway's metrics page (idempotency_metrics), summed over
# its workers; undef when the page cannot be read.
sub metrics_value {
    my ($port, $pattern) = @_;
    my $r = http_once({ port => $port, method => 'GET', path => '/metrics', close => 1 }, 5);
    return undef unless ($r->{status} // 0) == 200;
    return $r->{body} =~ /^\Q$pattern\E (\d+)$/m ? $1 : undef;
}

# A request whose response the caller collects when it wants (scenario 5).
sub open_request {
    my ($req) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $req->{port}, Proto => 'tcp', Timeout => 5,
    ) or return { error => "connect: $!" };
    $sock->autoflush(1);
    syswrite($sock, request_bytes({ %$req, close => 1 })) or return { error => "write: $!" };
    return { sock => $sock, buf => '', method => $req->{method}, sent_at => time };
}

# Waits up to $secs for the response of open_request: the result, or undef
# if it has not arrived yet.
sub collect_response {
    my ($st, $secs) = @_;
    return $st if $st->{error};
    my $deadline = time + $secs;
    while (1) {
        my $res = parse_response(\$st->{buf}, 0, $st->{method});
        return $res if $res;
        my $left = $deadline - time;
        return undef if $left <= 0;
        my $rin = '';
        vec($rin, fileno $st->{sock}, 1) = 1;
        next unless select($rin, undef, undef, $left) > 0;
        my $n = sysread($st->{sock}, $st->{buf}, 65536, length $st->{buf});
        next if !defined $n && $! == EINTR;
        if (!$n) {
            my $why = defined $n ? 'closed' : "$!";
            $res = parse_response(\$st->{buf}, 1, $st->{method});
            return $res if $res;
            return { error => "connection $why before a response" };
        }
    }
}

# ---------------------------------------------------------------- Redis

my ($REDIS_PORT, $REDIS_PID, $REDIS_DIR);

sub redis_command { redis_command_at($REDIS_PORT, @_) }

# One command to the Redis on 127.0.0.1:$port; simple replies only (status,
# error, integer, bulk string).
sub redis_command_at {
    my ($port, @args) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 2,
    ) or die "redis: cannot connect to $port: $!\n";
    my $cmd = '*' . @args . "\r\n" . join '', map { '$' . length($_) . "\r\n$_\r\n" } @args;
    syswrite($sock, $cmd) or die "redis: write: $!\n";
    my $buf = '';
    my $deadline = time + 3;
    while (time < $deadline) {
        my $rin = '';
        vec($rin, fileno $sock, 1) = 1;
        next unless select($rin, undef, undef, 0.2) > 0;
        my $n = sysread($sock, $buf, 65536, length $buf) or last;
        if ($buf =~ /^[+\-:](.*?)\r\n/) { close $sock; return $1 }
        if ($buf =~ /^\$(-?\d+)\r\n/) {
            return undef if $1 < 0;
            if (length($buf) >= length("\$$1\r\n") + $1 + 2) {
                close $sock;
                return substr($buf, length("\$$1\r\n"), $1);
            }
        }
    }
    close $sock;
    die "redis: no reply to $args[0]\n";
}

sub redis_start {
    my $log = "$TMP/redis.log";
    $REDIS_PORT //= free_port();
    $REDIS_PID = spawn('redis-server', $log, $REDIS,
        '--bind', '127.0.0.1', '--port', $REDIS_PORT, '--dir', $REDIS_DIR,
        '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec',
        '--daemonize', 'no', '--protected-mode', 'yes');
    my $deadline = time + STARTUP_TIMEOUT;
    while (time < $deadline) {
        die "stress.pl: redis-server exited; see $log\n" unless running($REDIS_PID);
        my $pong = eval { redis_command('PING') };
        return $REDIS_PID if defined $pong && $pong eq 'PONG';
        sleep 0.05;
    }
    die "stress.pl: redis-server did not answer on 127.0.0.1:$REDIS_PORT\n";
}

sub redis_stop {
    stop_pid($REDIS_PID, 'TERM');
    $REDIS_PID = undef;
}

# A second redis-server with a TLS port (and a plain one, for the checks),
# its certificate for 127.0.0.1 signed by a CA made here; started once.
my ($TLS_REDIS_PORT, $TLS_PORT, $TLS_REDIS_PID);

sub openssl_run {
    my $out = `openssl @_ 2>&1`;
    die "stress.pl: openssl @_ failed:\n$out" if $?;
}

sub tls_redis_start {
    return if $TLS_REDIS_PID && running($TLS_REDIS_PID);
    my $d = "$TMP/tls";
    make_path($d);
    if (!-e "$d/server.pem") {
        openssl_run('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', 2,
                    '-keyout', "$d/ca.key", '-out', "$d/ca.pem", '-subj', '/CN=stress-ca');
        openssl_run('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                    '-keyout', "$d/server.key", '-out', "$d/server.csr", '-subj', '/CN=127.0.0.1');
        open my $fh, '>', "$d/server.ext" or die "stress.pl: $d/server.ext: $!\n";
        print {$fh} "subjectAltName=IP:127.0.0.1\n";
        close $fh;
        openssl_run('x509', '-req', '-in', "$d/server.csr", '-CA', "$d/ca.pem", '-CAkey', "$d/ca.key",
                    '-CAcreateserial', '-days', 2, '-out', "$d/server.pem", '-extfile', "$d/server.ext");
        chmod 0644, glob "$d/*";   # workers run as another user when we are root
    }
    ($TLS_REDIS_PORT, $TLS_PORT) = (free_port(), free_port());
    $TLS_REDIS_PID = spawn('redis-server (TLS)', "$TMP/redis-tls.log", $REDIS,
        '--bind', '127.0.0.1', '--port', $TLS_REDIS_PORT, '--tls-port', $TLS_PORT,
        '--tls-cert-file', "$d/server.pem", '--tls-key-file', "$d/server.key", '--tls-ca-cert-file', "$d/ca.pem",
        '--tls-auth-clients', 'no', '--save', '', '--appendonly', 'no', '--daemonize', 'no');
    my $deadline = time + STARTUP_TIMEOUT;
    while (time < $deadline) {
        die "stress.pl: redis-server (TLS) exited; see $TMP/redis-tls.log\n" unless running($TLS_REDIS_PID);
        my $pong = eval { redis_command_at($TLS_REDIS_PORT, 'PING') };
        return if defined $pong && $pong eq 'PONG';
        sleep 0.05;
    }
    die "stress.pl: redis-server (TLS) did not answer on 127.0.0.1:$TLS_REDIS_PORT\n";
}

sub tls_locations {
    my $tls = "idempotency_redis 127.0.0.1:$TLS_PORT ssl; idempotency_redis_ssl_trusted_certificate $TMP/tls/ca.pem;";
    return "        location /s11w0/ { idempotency on; $tls proxy_pass http://payments; }\n"
         . "        location /s11w5/ { idempotency on; idempotency_wait 5s; $tls proxy_pass http://payments; }\n";
}

# ---------------------------------------------------------------- upstream

my ($UP_PORT, $UP_PID, $UP_LOG);

sub upstream_start {
    $UP_LOG = "$TMP/upstream.log";
    for (1 .. 3) {
        $UP_PORT = free_port();
        $UP_PID = spawn('upstream.pl', $UP_LOG, $^X, $UPSTREAM_SCRIPT,
            '--listen', "127.0.0.1:$UP_PORT", '--state-dir', "$TMP/upstream-state",
            '--pid-file', "$TMP/upstream.pid");
        my $deadline = time + STARTUP_TIMEOUT;
        while (time < $deadline && running($UP_PID)) {
            my $r = http_once({ port => $UP_PORT, method => 'GET', path => '/_health' }, 2);
            return if ($r->{status} // 0) == 200;
            sleep 0.05;
        }
        stop_pid($UP_PID);
    }
    die "stress.pl: upstream.pl did not start; see $UP_LOG\n";
}

# Executions of each path, from the upstream's /_count/<path>. A query that
# fails is asked again until the bound, which a loaded machine must not
# reach: 60 s plus 50 ms a path (3000 paths: 210 s).
sub upstream_counts {
    my (@paths) = @_;
    my %count;
    my $p = pool_new(concurrency => 16, on_done => sub {
        my ($req, $res, $pool) = @_;
        if (($res->{status} // 0) == 200 && $res->{body} =~ /^(\d+)$/) {
            $count{ $req->{count_path} } = $1;
        } else {
            pool_submit($pool, $req, 0.1);
        }
    });
    pool_submit($p, { port => $UP_PORT, method => 'GET', path => "/_count$_", count_path => $_, close => 1 })
        for @paths;
    pool_run($p, time + 60 + 0.05 * @paths);
    my @missing = grep { !defined $count{$_} } @paths;
    die sprintf("stress.pl: no count from the upstream for %d of %d paths (%s first)\n",
                scalar @missing, scalar @paths, $missing[0]) if @missing;
    return \%count;
}

# Total executions so far per path prefix, from the upstream's log lines
# "execution N METHOD PATH?QUERY body=LEN" (a cross-check of /_count).
sub upstream_log_executions {
    my ($prefix) = @_;
    open my $fh, '<', $UP_LOG or return 0;
    my $n = 0;
    while (<$fh>) { $n++ if /^execution \d+ \S+ \Q$prefix\E/ }
    return $n;
}

# ---------------------------------------------------------------- nginx

my $SCENARIO_LOCATIONS = <<'LOC';
        location /s1w0/ { idempotency on; proxy_pass http://payments; }
        location /s1w5/ { idempotency on; idempotency_wait 5s; proxy_pass http://payments; }
        location /s2/   { idempotency on; proxy_pass http://payments; }
        location /s3/   { idempotency on; proxy_pass http://payments; }
        location /s4/   { idempotency on; idempotency_lock_ttl 5s; proxy_pass http://payments; }
        location /s5/   { idempotency on; idempotency_lock_ttl 2s; proxy_pass http://payments; }
        location /s7w0/ { idempotency on; idempotency_store zone=stress; proxy_pass http://payments; }
        location /s7w5/ { idempotency on; idempotency_store zone=stress; idempotency_wait 5s; proxy_pass http://payments; }
LOC

sub nginx_conf {
    my (%o) = @_;
    my $d = $o{dir};
    my $s6 = '';
    my $backend = '';
    if ($o{backend_port}) {
        my $pad = 'x' x 600;
        $s6 = <<"S6";
        location /s6/ {
            idempotency on;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend6;
        }
S6
        $backend = <<"BACKEND";
    upstream backend6 { server 127.0.0.1:$o{backend_port}; keepalive 32; }
    server {
        listen 127.0.0.1:$o{backend_port};
        access_log $d/logs/backend.log execution buffer=64k;
        location / { return 201 '{"execution":"\$request_id","uri":"\$request_uri","pad":"$pad"}'; }
    }
BACKEND
    }
    return <<"CONF";
# generated by scripts/stress.pl
load_module $MODULE;
master_process on;
daemon on;
worker_processes $o{workers};
worker_rlimit_nofile 8192;
@{[ $o{main} // '' ]}
error_log $d/logs/error.log notice;
pid $d/nginx.pid;

events { worker_connections 4096; }

http {
    log_format stress '\$msec \$status \$idempotency_status "\$request" \$http_idempotency_key';
    log_format execution '\$msec \$request_uri';
    access_log $d/logs/access.log stress buffer=64k flush=1s;

    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;

    keepalive_requests 100000;
    keepalive_timeout 60s;

    idempotency_redis 127.0.0.1:$REDIS_PORT;
    idempotency_zone zone=stress:16m;
    idempotency_scope "";               # one caller: the load generator

    upstream payments { server 127.0.0.1:$UP_PORT; }

    server {
        listen 127.0.0.1:$o{port};
        add_header X-Idempotency-Status \$idempotency_status always;
        location = /health { return 200 "ok\\n"; }
        location = /metrics { idempotency_metrics; }
$SCENARIO_LOCATIONS$s6@{[ $o{locations} // '' ]}    }
$backend}
CONF
}

# STRESS_ASAN: gcc's ASan runtime preloaded into nginx (the packaged binary
# is not instrumented, the module is), as scripts/asan-nginx.sh does; each
# process logs to asan.<pid> / ubsan.<pid> in $TMP/asan, only if it has
# something to report (no exit statistics, no leak check: nginx leaks by
# design at exit).
sub asan_env {
    return {} unless $ASAN;
    make_path("$TMP/asan");
    chmod 01777, "$TMP/asan";   # workers run as another user when we are root
    return {
        LD_PRELOAD    => $ASAN_RUNTIME . ($ENV{LD_PRELOAD} ? " $ENV{LD_PRELOAD}" : ''),
        ASAN_OPTIONS  => "log_path=$TMP/asan/asan:atexit=0:halt_on_error=0:detect_leaks=0:"
                       . 'fast_unwind_on_malloc=0:malloc_context_size=30' . ($ENV{ASAN_OPTIONS} ? ":$ENV{ASAN_OPTIONS}" : ''),
        UBSAN_OPTIONS => "log_path=$TMP/asan/ubsan:print_stacktrace=1:halt_on_error=0"
                       . ($ENV{UBSAN_OPTIONS} ? ":$ENV{UBSAN_OPTIONS}" : ''),
    };
}

# Sanitizer reports written since the last call: [file, new text] each.
my %asan_seen;
sub asan_new_reports {
    return () unless $ASAN && opendir my $dh, "$TMP/asan";
    my @new;
    for my $f (sort grep { /^(?:asan|ubsan)\.\d+$/ } readdir $dh) {
        my $path = "$TMP/asan/$f";
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

# Starts an nginx instance named $name; returns its handle.
sub nginx_start {
    my ($name, %o) = @_;
    my $dir = "$TMP/nginx-$name";
    make_path("$dir/logs", "$dir/tmp");
    my $ng = {
        name => $name, dir => $dir, workers => $o{workers} // 2,
        port => free_port(), conf => "$dir/nginx.conf", error_log => "$dir/logs/error.log",
        pid_file => "$dir/nginx.pid", log_offset => 0,
    };
    $ng->{backend_port} = free_port() if $o{backend};
    open my $fh, '>', $ng->{conf} or die "stress.pl: $ng->{conf}: $!\n";
    print $fh nginx_conf(dir => $dir, port => $ng->{port}, workers => $ng->{workers},
                         backend_port => $ng->{backend_port}, locations => $o{locations}, main => $o{main});
    close $fh;
    # STRESS_ASAN: the master and every process it forks keep this environment.
    my $env = asan_env();
    my @env = sort keys %$env;
    local @ENV{@env} = @$env{@env};
    my $check = system { $NGINX } $NGINX, '-t', '-q', '-p', "$dir/", '-c', $ng->{conf};
    die "stress.pl: nginx -t refused $ng->{conf}\n" if $check != 0;
    # daemon on, as nginx is run in production: the binary upgrade (USR2)
    # is ignored by a master whose parent is still the process that started it.
    my $starter = spawn("nginx $name (starting)", "$dir/logs/stderr.log", $NGINX, '-p', "$dir/", '-c', $ng->{conf});
    push @NGINX_ALL, $ng;
    my $deadline = time + STARTUP_TIMEOUT;
    sleep 0.02 while running($starter) && time < $deadline;
    stop_pid($starter) if running($starter);
    die "stress.pl: nginx $name did not start (exit status " . ($EXIT{$starter} // '?') . "); see $dir/logs\n"
        if $EXIT{$starter};
    while (time < $deadline && !$ng->{pid}) {
        if (open my $fh, '<', $ng->{pid_file}) { ($ng->{pid}) = (<$fh> // '') =~ /^(\d+)/ }
        sleep 0.02 unless $ng->{pid};
    }
    die "stress.pl: nginx $name wrote no pid file; see $dir/logs\n" unless $ng->{pid};
    $OWNED{ $ng->{pid} } = "nginx $name";
    while (time < $deadline) {
        die "stress.pl: nginx $name exited at start; see $dir/logs\n" unless running($ng->{pid});
        if (workers_of($ng->{pid}) >= $ng->{workers}) {
            my $r = http_once({ port => $ng->{port}, method => 'GET', path => '/health' }, 2);
            if (($r->{status} // 0) == 200) {
                note("nginx $name: master $ng->{pid}, workers ", join(' ', workers_of($ng->{pid})),
                     ", 127.0.0.1:$ng->{port}");
                return $ng;
            }
        }
        sleep 0.05;
    }
    die "stress.pl: nginx $name did not come up; see $dir/logs\n";
}

# Stops an instance: QUIT (graceful), then TERM, then KILL, by pid; also
# any of its workers left behind.
sub nginx_stop {
    my ($ng, $quiet) = @_;
    return if $ng->{stopped};
    $ng->{stopped} = 1;
    my @pids = grep { $_ } ($ng->{pid}, $ng->{old_pid});
    for my $pid (@pids) {
        next unless running($pid);
        my @workers = workers_of($pid);
        stop_pid($pid, 'QUIT', 5);
        for my $w (@workers) {
            stop_pid($w, 'TERM', 2) if running($w) && cmdline($w) =~ /^nginx: worker/;
        }
    }
    delete $OWNED{$_} for @pids;
}

# Lines added to the error log since the last call.
sub new_log_lines {
    my ($ng) = @_;
    open my $fh, '<', $ng->{error_log} or return ();
    seek $fh, $ng->{log_offset}, 0;
    my @lines = <$fh>;
    $ng->{log_offset} = tell $fh;
    chomp @lines;
    return @lines;
}

# Crash indicators in an error log; $allowed matches lines that are expected.
sub log_findings {
    my ($ng, $allowed) = @_;
    my (@bad, %errors);
    for my $line (new_log_lines($ng)) {
        if ($line =~ /\[(?:alert|crit|emerg)\]|signal 11|core dumped|segfault/i) {
            push @bad, $line unless $allowed && $line =~ $allowed;
        } elsif ($line =~ /\[(error|warn)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client: .*)?$/) {
            (my $msg = "[$1] $2") =~ s/\d+/N/g;
            $errors{$msg}++;
        }
    }
    return (\@bad, \%errors);
}

sub report_log {
    my ($sc, $ng, $allowed) = @_;
    my ($bad, $errors) = log_findings($ng, $allowed);
    for my $msg (sort { $errors->{$b} <=> $errors->{$a} } keys %$errors) {
        note("error log ($ng->{name}): $errors->{$msg} x $msg");
    }
    if (@$bad) {
        fail($sc, "error log of nginx $ng->{name} has " . @$bad . " crash/alert line(s)");
        note("  $_") for @$bad[0 .. ($#$bad < 19 ? $#$bad : 19)];
    }
    return ($bad, $errors);
}

# ---------------------------------------------------------------- results

my @RESULTS;

sub scenario_begin {
    my ($id, $title) = @_;
    say_("");
    say_("== Scenario $id: $title");
    return { id => $id, title => $title, start => time, failures => [], answers => {},
             requests => 0, executions => 0, duplicates => 0, notes => [] };
}

sub fail {
    my ($sc, $msg) = @_;
    push @{ $sc->{failures} }, $msg;
    note("FAIL: $msg");
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

sub scenario_end {
    my ($sc) = @_;
    if (my @reports = asan_new_reports()) {
        # Each distinct report (its error line and top frames, addresses
        # aside) once, up to its SUMMARY line, with the processes that wrote it.
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
        fail($sc, scalar(@reports) . ' nginx process(es) wrote sanitizer reports (' . scalar(@order)
                  . " distinct), in $TMP/asan");
        for my $sig (@order) {
            my %seen;
            my @f = grep { !$seen{$_}++ } @{ $files{$sig} };
            note("--- in " . @f . " process(es) ($f[0]" . (@f > 1 ? ", ..." : '') . "):");
            note("  $_") for grep { /\S/ } split /\n/, $text{$sig};
        }
    }
    $sc->{duration} = time - $sc->{start};
    $sc->{ok} = !@{ $sc->{failures} };
    say_(sprintf "  requests %d, upstream executions %d, duplicate executions %d",
         $sc->{requests}, $sc->{executions}, $sc->{duplicates});
    say_("  answers: ", answers_text($sc->{answers}));
    say_("  $_") for @{ $sc->{notes} };
    say_(sprintf "  duration %.1f s: %s", $sc->{duration}, $sc->{ok} ? 'PASS' : 'FAIL');
    push @RESULTS, $sc;
}

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

# ---------------------------------------------------------------- scenario 1

# $store: 0 (Redis), 1 (the shared memory zone) or 'tls' (Redis over TLS).
sub scenario1 {
    my ($id, $wait, $store) = @_;
    my $zone = $store && $store ne 'tls';
    my $tls = $store && $store eq 'tls';
    my $loc = ($zone ? 's7' : $tls ? 's11' : 's1') . ($wait ? 'w5' : 'w0');
    my $sc = scenario_begin($id, "$S1_REQUESTS simultaneous POSTs, one key, upstream sleep=1, "
                                 . "idempotency_wait " . ($wait ? '5s' : '0')
                                 . ($zone ? ', store: shared memory zone' : $tls ? ', store: Redis over TLS' : ''));
    tls_redis_start() if $tls;
    my $ng = nginx_start("s$id", workers => 2, $tls ? (locations => tls_locations()) : ());
    my $path = "/$loc/pay";
    my $key = "s$id-" . int(rand 1e9);
    my @res;
    my $p = pool_new(concurrency => $S1_REQUESTS, on_done => sub { push @res, $_[1] });
    pool_submit($p, { port => $ng->{port}, method => 'POST', path => "$path?sleep=1", timeout => 20,
                      headers => [['Idempotency-Key', $key], ['Content-Type', 'application/x-www-form-urlencoded']],
                      body => 'amount=100&currency=EUR' }) for 1 .. $S1_REQUESTS;
    pool_run($p, time + 30);
    count_answer($sc, $_) for @res;

    my $count = upstream_counts($path)->{$path};
    $sc->{executions} = $count;
    $sc->{duplicates} = $count > 1 ? $count - 1 : 0;
    fail($sc, "$count upstream executions, expected exactly 1") if $count != 1;

    my @orig = grep { !$_->{error} && $_->{status} == 201 && !$_->{headers}{'idempotent-replayed'} } @res;
    my @replays = grep { !$_->{error} && $_->{status} == 201 && ($_->{headers}{'idempotent-replayed'} // '') eq 'true' } @res;
    my @conflicts = grep { !$_->{error} && $_->{status} == 409 } @res;
    fail($sc, scalar(@orig) . " answers were first executions (201 without Idempotent-Replayed), expected 1")
        if @orig != 1;
    if (@orig) {
        my $body = $orig[0]{body};
        my $differ = grep { $_->{body} ne $body } @replays;
        my $other_exec = grep { ($_->{headers}{'x-upstream-execution'} // '') ne ($orig[0]{headers}{'x-upstream-execution'} // '-') } @replays;
        fail($sc, "$differ replays differ from the first 201's body") if $differ;
        fail($sc, "$other_exec replays carry another X-Upstream-Execution") if $other_exec;
        push @{ $sc->{notes} }, "first 201 body: $body";
    }
    my $bad_409 = grep { ($_->{headers}{'retry-after'} // '') !~ /^[1-9]\d*$/
                         || ($_->{headers}{'content-type'} // '') !~ m{application/problem\+json} } @conflicts;
    fail($sc, "$bad_409 answers 409 lack Retry-After >= 1 or problem+json") if $bad_409;
    my $others = @res - @orig - @replays - @conflicts;
    fail($sc, "$others answers are neither the first 201, a replay nor 409") if $others;
    fail($sc, "only " . scalar(@res) . " of $S1_REQUESTS requests answered") if @res != $S1_REQUESTS;
    if ($wait) {
        fail($sc, scalar(@conflicts) . " answers 409 although idempotency_wait 5s outlasts the 1 s upstream")
            if @conflicts;
        my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @res;
        push @{ $sc->{notes} }, sprintf "slowest answer %.2f s", $max // 0;
    }
    if ($tls) {
        my $failures = metrics_value($ng->{port}, 'idempotency_redis_tls_failures_total') // -1;
        fail($sc, "idempotency_redis_tls_failures_total is $failures, expected 0") if $failures != 0;
        require Digest::SHA;
        # the store key: the virtual server (unnamed here: ""), the scope (""), then the key
        my $spaced = '0:';
        my $record = eval {
            redis_command_at($TLS_REDIS_PORT, 'GET', 'idem:' . Digest::SHA::sha256_hex(length($spaced) . ":$spaced$key"))
        };
        fail($sc, "the Redis reached over TLS holds no response for the key")
            unless defined $record && length $record > 4 && ord(substr($record, 4, 1)) == 2;
    }
    nginx_stop($ng);
    report_log($sc, $ng);
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 2

sub scenario2 {
    my $sc = scenario_begin(2, "two gateways sharing one Redis race on $S2_KEYS keys "
                               . "($S2_PER_GW per gateway per key per round, 2 rounds)");
    my $gwa = nginx_start('s2a', workers => 2);
    my $gwb = nginx_start('s2b', workers => 2);
    my @paths = map { "/s2/k$_" } 1 .. $S2_KEYS;
    my %by_key;      # path => [results]
    my $p = pool_new(concurrency => 2 * $S2_PER_GW * $S2_KEYS,
                     on_done => sub { my ($req, $res) = @_; push @{ $by_key{ $req->{kpath} } }, $res });
    for my $round (1, 2) {
        # Round 1 spreads each key's requests over 0.8 s, against a 0.5 s
        # upstream: some find the original in flight (409), some finished
        # (replay). Round 2 sends them all at once again.
        for my $path (@paths) {
            (my $key = $path) =~ s{.*/}{s2-};
            for my $gw (($gwa) x $S2_PER_GW, ($gwb) x $S2_PER_GW) {
                pool_submit($p, { port => $gw->{port}, method => 'POST', path => "$path?sleep=0.5",
                                  kpath => $path, timeout => 20, body => "{\"key\":\"$key\"}",
                                  headers => [['Idempotency-Key', $key], ['Content-Type', 'application/json']] },
                            $round == 1 ? rand 0.8 : 0);
            }
        }
        pool_run($p, time + 40);
    }
    my $counts = upstream_counts(@paths);
    my ($multi, $none, $bad_bodies, $bad_status, $firsts) = (0, 0, 0, 0, 0);
    for my $path (@paths) {
        my $c = $counts->{$path};
        $sc->{executions} += $c;
        $sc->{duplicates} += $c - 1 if $c > 1;
        $multi++ if $c > 1;
        $none++ if $c < 1;
        my @r = @{ $by_key{$path} // [] };
        count_answer($sc, $_) for @r;
        my @ok = grep { !$_->{error} && $_->{status} == 201 } @r;
        my %bodies = map { $_->{body} => 1 } @ok;
        $bad_bodies++ if keys %bodies > 1;
        $firsts += grep { !$_->{headers}{'idempotent-replayed'} } @ok;
        $bad_status += grep { $_->{error} || ($_->{status} != 201 && $_->{status} != 409) } @r;
    }
    fail($sc, "$multi keys executed more than once") if $multi;
    fail($sc, "$none keys never executed") if $none;
    fail($sc, "$bad_bodies keys answered with different 201 bodies") if $bad_bodies;
    fail($sc, "$firsts first executions for $S2_KEYS keys") if $firsts != $S2_KEYS;
    fail($sc, "$bad_status answers neither 201 nor 409") if $bad_status;
    my $expected = 2 * 2 * $S2_PER_GW * $S2_KEYS;
    fail($sc, "$sc->{requests} answers for $expected requests") if $sc->{requests} != $expected;
    nginx_stop($_) for $gwa, $gwb;
    report_log($sc, $_) for $gwa, $gwb;
    scenario_end($sc);
}

# ---------------------------------------------------------------- load helper
#
# Keyed clients: each key is POSTed until it gets a 2xx, retrying on
# connection errors and 409/429/502/503/504 with a small backoff (at most
# $max_attempts attempts and $key_time seconds per key).

sub keyed_load {
    my (%o) = @_;
    my $sc = $o{sc};
    my @keys = @{ $o{keys} };         # [{ path, key, body, query }]
    my $max_attempts = $o{max_attempts} // 60;
    my $key_time = $o{key_time} // 60;
    my %state = (done => 0, gave_up => 0, attempts => 0, retries => 0);
    my $p = pool_new(
        concurrency => $o{concurrency} // $CONCURRENCY,
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
            pool_submit($pool, $req, backoff($k->{attempts}));
        },
    );
    my $port = $o{port};
    for my $k (@keys) {
        pool_submit($p, { port => ref $port ? $port->() : $port, method => 'POST',
                          path => $k->{path} . ($k->{query} // ''), timeout => $o{timeout} // 10,
                          k => $k, body => $k->{body},
                          headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] });
        $k->{first} = time;
    }
    my $completed = pool_run($p, time + ($o{time_limit} // 120));
    $state{completed} = $completed;
    return \%state;
}

# Executions per key: duplicates and keys that never ran.
sub tally_executions {
    my ($sc, $keys) = @_;
    my $counts = upstream_counts(map { $_->{path} } @$keys);
    my (@dups, $never);
    for my $k (@$keys) {
        my $c = $counts->{ $k->{path} };
        $k->{count} = $c;
        $sc->{executions} += $c;
        if ($c > 1) { $sc->{duplicates} += $c - 1; push @dups, $k }
        $never++ if $c == 0 && $k->{final} && ($k->{final}{status} // 0) =~ /^2/;
    }
    if (@dups) {
        fail($sc, scalar(@dups) . " keys executed more than once ($sc->{duplicates} duplicate executions)");
        for my $k (@dups[0 .. ($#dups < 9 ? $#dups : 9)]) {
            note("  duplicate: $k->{path} key $k->{key}: $k->{count} executions; client saw: @{ $k->{answers} // [] }");
        }
    }
    fail($sc, "$never keys got a 2xx but never reached the upstream") if $never;
    return \@dups;
}

# Every key once more: it must be a replay (no execution).
sub replay_check {
    my (%o) = @_;
    my ($sc, $keys, $port) = @o{qw(sc keys port)};
    my $until = time + ($o{within} // 0);
    my %tally;
    my $p = pool_new(
        concurrency => $CONCURRENCY,
        on_done => sub {
            my ($req, $res, $pool) = @_;
            my $k = $req->{k};
            count_answer($sc, $res);
            if (retryable($res) && time < $until) {
                $k->{replay_retries}++;
                pool_submit($pool, $req, 0.2);
                return;
            }
            my $label = answer_label($res);
            $label .= ' (Idempotent-Replayed)' if ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
            $tally{$label}++;
            $k->{replay} = $res;
        },
    );
    for my $k (@$keys) {
        pool_submit($p, { port => $port, method => 'POST', path => $k->{path} . ($k->{query} // ''),
                          timeout => 10, k => $k, body => $k->{body},
                          headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] });
    }
    pool_run($p, time + ($o{within} // 0) + 60);
    my @not = grep { !$_->{replay} || ($_->{replay}{headers}{'idempotent-replayed'} // '') ne 'true'
                     || $_->{replay}{status} !~ /^2/ } @$keys;
    my @differ = grep { $_->{replay} && $_->{final} && !$_->{final}{error}
                        && ($_->{replay}{body} // '') ne ($_->{final}{body} // '') } @$keys;
    return (\%tally, \@not, \@differ);
}

# ---------------------------------------------------------------- scenario 3

sub scenario3 {
    my $sc = scenario_begin(3, "$S3_KEYS keys, clients retry until 2xx, while Redis is paused 2 s, "
                               . "Redis restarts and nginx reloads");
    my $ng = nginx_start('s3', workers => 2);
    my @keys = map { { path => "/s3/k$_", key => "s3-key-$_", body => "{\"order\":$_}",
                       query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $S3_KEYS;
    my @events;
    my $done = 0;
    my $phase = 0;
    my $phase_at = 0;
    my $old_workers;
    my $t_start = time;
    my $on_tick = sub {
        my ($p) = @_;
        my $progress = $p->{completed};     # attempts answered
        my $now = time;
        if ($phase == 0 && $progress >= 0.15 * $S3_KEYS) {
            kill 'STOP', $REDIS_PID;
            push @events, sprintf('%.2fs: Redis paused (SIGSTOP pid %d) after %d answers', $now - $t_start, $REDIS_PID, $progress);
            note($events[-1]);
            ($phase, $phase_at) = (1, $now);
        } elsif ($phase == 1 && $now - $phase_at >= 2) {
            kill 'CONT', $REDIS_PID;
            push @events, sprintf('%.2fs: Redis resumed (SIGCONT) after %.2f s', $now - $t_start, $now - $phase_at);
            note($events[-1]);
            ($phase, $phase_at) = (2, $now);
        } elsif ($phase == 2 && $progress >= 0.45 * $S3_KEYS && $now - $phase_at >= 1) {
            my $old = $REDIS_PID;
            my $t = time;
            redis_stop();
            redis_start();
            push @events, sprintf('%.2fs: Redis restarted on port %d (pid %d -> %d, down %.2f s, AOF kept)',
                                  $now - $t_start, $REDIS_PORT, $old, $REDIS_PID, time - $t);
            note($events[-1]);
            ($phase, $phase_at) = (3, time);
        } elsif ($phase == 3 && $progress >= 0.7 * $S3_KEYS && $now - $phase_at >= 1) {
            $old_workers = join ' ', workers_of($ng->{pid});
            kill 'HUP', $ng->{pid};
            push @events, sprintf('%.2fs: nginx reloaded (SIGHUP master %d; old workers %s)',
                                  $now - $t_start, $ng->{pid}, $old_workers);
            note($events[-1]);
            ($phase, $phase_at) = (4, $now);
        } elsif ($phase == 4) {
            my %old = map { $_ => 1 } split ' ', $old_workers;
            my @w = workers_of($ng->{pid});
            my @new = grep { !$old{$_} } @w;
            if (@new >= 2) {
                note(sprintf 'nginx reload done: new workers %s (%.2f s)', "@new", $now - $phase_at);
                $phase = 5;
            } elsif ($now - $phase_at > 15) {
                fail($sc, 'nginx did not start new workers within 15 s of SIGHUP');
                $phase = 5;
            }
        }
        return $phase > 0 && $phase < 5;     # keep going until every disruption has run
    };
    my $st = keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                        max_attempts => 60, key_time => 90, time_limit => 120);
    fail($sc, "the load did not finish in time") unless $st->{completed};
    fail($sc, "only " . ($phase) . " of 5 disruption phases ran (the load finished first)") if $phase < 5;
    note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
         $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
    my @gave_up = grep { !$_->{final} || ($_->{final}{status} // 0) !~ /^2/ } @keys;
    if (@gave_up) {
        fail($sc, scalar(@gave_up) . " keys never got a 2xx (bounded retries)");
        note("  $_->{path}: @{ $_->{answers} // [] }") for @gave_up[0 .. ($#gave_up < 4 ? $#gave_up : 4)];
    }
    my $dups = tally_executions($sc, \@keys);
    my $logged = upstream_log_executions('/s3/');
    push @{ $sc->{notes} }, "upstream log: $logged executions of /s3/ (cross-check of /_count)";
    fail($sc, "upstream log shows $logged executions, /_count says $sc->{executions}")
        if $logged != $sc->{executions};
    my $first_exec = grep { $_->{final} && ($_->{final}{headers}{'x-upstream-execution'} // '') ne '1'
                            && ($_->{final}{status} // 0) =~ /^2/ } @keys;
    fail($sc, "$first_exec keys' 2xx came from an execution other than the first") if $first_exec;

    # After the storm, every key must replay (nothing executes again).
    my $before = $sc->{executions};
    my $requests_before = $sc->{requests};
    my ($tally, $not, $differ) = replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
    my $counts = upstream_counts(map { $_->{path} } @keys);
    my $after = 0;
    $after += $_ for values %$counts;
    push @{ $sc->{notes} }, "replay pass (" . ($sc->{requests} - $requests_before) . " requests): "
        . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
    if ($after != $before) {
        my $n = $after - $before;
        $sc->{executions} = $after;
        $sc->{duplicates} += $n;
        fail($sc, "the replay pass executed $n keys again");
    }
    fail($sc, scalar(@$not) . " keys did not replay after the storm") if @$not;
    fail($sc, scalar(@$differ) . " replays differ from the body the client first got") if @$differ;

    # The metrics zone outlives the reload: every execution, before and after
    # it, is counted once as "new".
    my $new = metrics_value($ng->{port}, 'idempotency_requests_total{outcome="new"}');
    push @{ $sc->{notes} }, 'metrics across the reload: outcome="new" ' . ($new // 'unreadable')
        . " for $sc->{executions} executions";
    fail($sc, 'the metrics page counts ' . ($new // 'nothing') . " new requests for $sc->{executions} executions "
         . '(counters lost at the reload?)') unless defined $new && $new == $sc->{executions};
    push @{ $sc->{notes} }, @events;
    nginx_stop($ng);
    my (undef, $errors) = report_log($sc, $ng);
    # A Redis outage must not flood the log: per-request lines are written at
    # most once a second per worker.
    my $module_lines = 0;
    $module_lines += $errors->{$_} for grep { /idempotency/ } keys %$errors;
    my $unavailable = $sc->{answers}{'503/unavailable'} // 0;
    push @{ $sc->{notes} }, "error log: $module_lines module lines (error/warn) for $unavailable requests answered 503";
    fail($sc, "the outage wrote $module_lines module lines to the error log (at most 100 expected)")
        if $module_lines > 100;
    my $store_warnings = 0;
    $store_warnings += $errors->{$_} for grep { /could not store the response/ } keys %$errors;
    push @{ $sc->{notes} }, "$store_warnings warnings 'could not store the response: the claim had expired or was "
        . "taken over', yet every key replays its first answer: no response was lost (a store resent after "
        . "the reconnect found its first attempt applied)" if $store_warnings && !@$not && !@$differ;
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 4

sub scenario4 {
    my $sc = scenario_begin(4, "binary upgrade under load ($S4_KEYS keys, upstream sleep=0.2, "
                               . "idempotency_lock_ttl 5s): USR2, WINCH, QUIT");
    my $ng = nginx_start('s4', workers => 2);
    my @keys = map { { path => "/s4/k$_", key => "s4-key-$_", body => "{\"order\":$_}", query => '?sleep=0.2' } }
        1 .. $S4_KEYS;
    my ($phase, $phase_at, $old, $new) = (0, 0, $ng->{pid}, undef);
    my @events;
    my $t_start = time;
    my $ev = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); note($events[-1]) };
    my $on_tick = sub {
        my ($p) = @_;
        my $now = time;
        if ($phase == 0 && $p->{completed} >= 0.25 * $S4_KEYS) {
            kill 'USR2', $old;
            $ev->("USR2 to master $old (after $p->{completed} answers, $p->{nactive} in flight)");
            ($phase, $phase_at) = (1, $now);
        } elsif ($phase == 1) {
            my $pid;
            if (-e "$ng->{pid_file}.oldbin" && open my $fh, '<', $ng->{pid_file}) {
                ($pid) = (<$fh> // '') =~ /(\d+)/;
            }
            if ($pid && $pid != $old && running($pid) && workers_of($pid) >= 2) {
                $new = $pid;
                $OWNED{$new} = 'nginx s4 (upgraded)';
                $ng->{pid} = $new;
                $ng->{old_pid} = $old;
                $ev->("new master $new up with workers " . join(' ', workers_of($new)) . "; WINCH to old master $old");
                kill 'WINCH', $old;
                ($phase, $phase_at) = (2, $now);
            } elsif ($now - $phase_at > 15) {
                fail($sc, 'no new master with workers within 15 s of USR2');
                $phase = 9;
            }
        } elsif ($phase == 2) {
            my @old_workers = workers_of($old);
            if (!@old_workers) {
                $ev->("old workers gone; QUIT to old master $old");
                kill 'QUIT', $old;
                ($phase, $phase_at) = (3, $now);
            } elsif ($now - $phase_at > 20) {
                fail($sc, "old workers (@old_workers) still running 20 s after WINCH");
                $phase = 9;
            }
        } elsif ($phase == 3) {
            if (!running($old)) {
                $ev->("old master $old exited");
                delete $OWNED{$old};
                $phase = 4;
            } elsif ($now - $phase_at > 15) {
                fail($sc, "old master $old still running 15 s after QUIT");
                $phase = 9;
            }
        }
        return $phase > 0 && $phase < 4;
    };
    my $st = keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                        max_attempts => 60, key_time => 60, time_limit => 90);
    fail($sc, "the load did not finish in time") unless $st->{completed};
    fail($sc, "the upgrade did not complete (phase $phase)") if $phase != 4;
    note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
         $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
    my @gave_up = grep { !$_->{final} || ($_->{final}{status} // 0) !~ /^2/ } @keys;
    fail($sc, scalar(@gave_up) . " keys never got a 2xx") if @gave_up;
    fail($sc, "the new master is not running") unless $new && running($new);
    tally_executions($sc, \@keys);
    my $logged = upstream_log_executions('/s4/');
    fail($sc, "upstream log shows $logged executions, /_count says $sc->{executions}")
        if $logged != $sc->{executions};

    # No stuck claim: every key's retry gets a 2xx replay within lock_ttl (5s).
    my $t = time;
    my $before = $sc->{executions};
    my ($tally, $not, $differ) = replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
    my $counts = upstream_counts(map { $_->{path} } @keys);
    my $after = 0;
    $after += $_ for values %$counts;
    my ($slowest) = sort { $b <=> $a } map { $_->{replay} ? $_->{replay}{done_at} - $t : 99 } @keys;
    push @{ $sc->{notes} }, sprintf('stuck-claim check: %s; last replay %.2f s after the load',
        join(', ', map { "$_: $tally->{$_}" } sort keys %$tally), $slowest // 0);
    if ($after != $before) {
        $sc->{duplicates} += $after - $before;
        $sc->{executions} = $after;
        fail($sc, "the stuck-claim check executed " . ($after - $before) . " keys again");
    }
    fail($sc, scalar(@$not) . " keys did not get a 2xx replay within idempotency_lock_ttl (stuck claim?)") if @$not;
    fail($sc, scalar(@$differ) . " replays differ from the body the client first got") if @$differ;
    push @{ $sc->{notes} }, @events;
    nginx_stop($ng);
    report_log($sc, $ng);
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 5

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
    for my $w (workers_of($master)) {
        opendir my $dh, "/proc/$w/fd" or next;
        for my $fd (readdir $dh) {
            my $link = readlink "/proc/$w/fd/$fd" // next;
            return $w if $link =~ /^socket:\[(\d+)\]$/ && $inodes{$1};
        }
    }
    return;
}

sub scenario5 {
    my $sc = scenario_begin(5, "the worker running a request is SIGKILLed (idempotency_lock_ttl 2s, upstream sleep=3)");
    my $ng = nginx_start('s5', workers => 2);
    my $path = '/s5/pay';
    my $req = { port => $ng->{port}, method => 'POST', path => "$path?sleep=3",
                headers => [['Idempotency-Key', 's5-key'], ['Content-Type', 'application/json']],
                body => '{"amount":100}' };
    my $count = sub { upstream_counts($path)->{$path} };
    my $orig = open_request($req);
    $sc->{requests}++;
    my $deadline = time + 5;
    sleep 0.05 while $count->() < 1 && time < $deadline;
    my ($worker, $killed_at, @killed);
    if ($count->() < 1) {
        fail($sc, 'the original never reached the upstream');
    } else {
        $worker = worker_connected_to($ng->{pid}, $UP_PORT);
        my @before = workers_of($ng->{pid});
        if ($worker) {
            @killed = ($worker);
            note("SIGKILL to worker $worker, the one connected to the upstream (workers were @before)");
        } else {
            @killed = @before;     # it is one of them
            note("cannot tell which worker holds the upstream connection: SIGKILL to all workers (@before)");
            push @{ $sc->{notes} }, "all workers killed (@before): the one running the request was not identified";
        }
        kill 'KILL', @killed;
        $killed_at = time;
    }
    my $ores = collect_response($orig, 2) // { error => 'no answer' };
    $sc->{answers}{ 'original: ' . answer_label($ores) }++;
    close $orig->{sock} if $orig->{sock};

    my ($executed_after, @seen);
    if ($killed_at) {
        # Right after the kill the claim must still be there: 409.
        my $r = http_once({ %$req }, 5);
        count_answer($sc, $r);
        push @seen, sprintf('%.2fs %s', time - $killed_at, answer_label($r));
        fail($sc, 'the retry right after the kill got ' . answer_label($r) . ', expected 409 (claim kept)')
            unless !$r->{error} && $r->{status} == 409;
        # Then retry every 100 ms until one is executed (bounded: 10 s).
        my $limit = time + 10;
        my $execs = $count->();
        while (time < $limit) {
            my $sent = time;
            my $st = open_request($req);
            $sc->{requests}++;
            my $res = collect_response($st, 0.5);
            if (!$res && $count->() > $execs) {
                $executed_after = $sent - $killed_at;
                $res = collect_response($st, 10) // { error => 'timeout' };
                $sc->{answers}{ answer_label($res) }++;
                push @seen, sprintf('%.2fs %s (executed, X-Upstream-Execution %s)', $sent - $killed_at,
                                    answer_label($res), $res->{headers}{'x-upstream-execution'} // '-');
                close $st->{sock} if $st->{sock};
                last;
            }
            $res //= collect_response($st, 10) // { error => 'timeout' };
            close $st->{sock} if $st->{sock};
            $sc->{answers}{ answer_label($res) }++;
            push @seen, sprintf('%.2fs %s', $sent - $killed_at, answer_label($res)) if @seen < 3 || !$res->{error} && $res->{status} != 409;
            if (!$res->{error} && $res->{status} =~ /^2/) {
                # answered at once: it was not executed by this retry
                fail($sc, 'a retry got ' . answer_label($res) . ' without a new execution');
                last;
            }
            sleep 0.1;
        }
    }
    my $execs = $count->();
    $sc->{executions} = $execs;
    $sc->{duplicates} = 0;   # the second execution is the documented one, after lock_ttl
    if ($killed_at) {
        if (!defined $executed_after) {
            fail($sc, 'no retry executed within 10 s of the kill: the claim is stuck');
        } else {
            push @{ $sc->{notes} }, sprintf('retry executed %.2f s after the SIGKILL (lock_ttl 2 s, renewed every 0.67 s)',
                                            $executed_after);
            fail($sc, sprintf('the claim was gone %.2f s after the kill, before lock_ttl could have run out', $executed_after))
                if $executed_after < 2 * 2 / 3 - 0.2;
            fail($sc, sprintf('the claim outlived lock_ttl: retry executed %.2f s after the kill', $executed_after))
                if $executed_after > 2 + 0.6;
        }
        fail($sc, "$execs executions, expected 2 (the killed original and the retry after lock_ttl)") if $execs != 2;
        my @now = workers_of($ng->{pid});
        push @{ $sc->{notes} }, "workers after the kill: @now";
        fail($sc, 'the master did not replace the killed worker') if @now < 2;
        # The replay after the retry completed.
        my $r = http_once({ %$req }, 5);
        count_answer($sc, $r);
        push @seen, 'after: ' . answer_label($r) . (($r->{headers}{'idempotent-replayed'} // '') eq 'true' ? ' (Idempotent-Replayed)' : '');
        fail($sc, 'the key did not replay after the retry completed')
            unless !$r->{error} && $r->{status} == 201 && ($r->{headers}{'idempotent-replayed'} // '') eq 'true';
    }
    push @{ $sc->{notes} }, 'original: ' . answer_label($ores) . '; retries: ' . join('; ', @seen);
    nginx_stop($ng);
    my $killed_re = join '|', @killed;
    report_log($sc, $ng, @killed ? qr/worker process (?:$killed_re) exited on signal 9\b/ : undef);
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 6

sub scenario6 {
    my $sc = scenario_begin(6, "memory: $S6_REQUESTS requests (40% new keys, 40% replays, 20% no key), "
                               . "worker_processes 1, concurrency $CONCURRENCY");
    my $ng = nginx_start('s6', workers => 1, backend => 1);
    my ($worker) = workers_of($ng->{pid});
    my @checkpoints = grep { $_ <= $S6_REQUESTS } map { int $_ } (1000, 10_000, 50_000, 100_000);
    push @checkpoints, $S6_REQUESTS unless grep { $_ == $S6_REQUESTS } @checkpoints;
    my %rss;
    my @done_keys;          # [key, body of the first answer]
    my %kinds;
    my ($mismatch, $unexpected) = (0, 0);
    my $next = 0;
    my $i = 0;
    my $feed = sub {
        return undef if $i >= $S6_REQUESTS;
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
    my $p = pool_new(
        concurrency => $CONCURRENCY, feed => $feed,
        on_done => sub {
            my ($req, $res) = @_;
            count_answer($sc, $res);
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
                $rss{$cp} = vm_rss_kb($worker);
                note(sprintf 'after %6d requests: worker %d VmRSS %s kB (%.1f s)', $cp, $worker,
                             $rss{$cp} // '?', time - $sc->{start});
            }
        });
    my $completed = pool_run($p, time + S6_TIME_LIMIT);
    my ($w_now) = workers_of($ng->{pid});
    fail($sc, "the worker changed ($worker -> " . ($w_now // 'none') . "): it crashed") if ($w_now // 0) != $worker;
    fail($sc, "only $sc->{requests} of $S6_REQUESTS requests in the " . S6_TIME_LIMIT . " s limit") unless $completed;
    fail($sc, "$unexpected unexpected answers (not 201, or a new key replayed)") if $unexpected;
    fail($sc, "$mismatch replays were not the stored first answer") if $mismatch;
    nginx_stop($ng);     # flushes the backend's access log
    my $executions = 0;
    if (open my $fh, '<', "$ng->{dir}/logs/backend.log") { $executions++ while <$fh> }
    $sc->{executions} = $executions;
    my $expected = ($kinds{new} // 0) + ($kinds{nokey} // 0);
    $sc->{duplicates} = $executions > $expected ? $executions - $expected : 0;
    push @{ $sc->{notes} }, "backend executions $executions for " . ($kinds{new} // 0) . " new keys + "
        . ($kinds{nokey} // 0) . " no-key requests; " . ($kinds{replay} // 0) . " replays";
    fail($sc, "backend executed $executions times, expected $expected") if $executions != $expected;
    my @cps = sort { $a <=> $b } keys %rss;
    push @{ $sc->{notes} }, 'worker VmRSS: ' . join(', ', map { "${_}: $rss{$_} kB" } @cps);
    my ($from, $to) = ($rss{10_000}, $rss{$cps[-1]});
    if ($from && $to && $cps[-1] > 10_000) {
        my $growth = ($to - $from) / $from;
        push @{ $sc->{notes} }, sprintf('VmRSS growth from 10k to %d requests: %+.1f%% (limit %d%%)',
                                        $cps[-1], 100 * $growth, 100 * RSS_GROWTH_MAX);
        fail($sc, sprintf('worker VmRSS grew %.1f%% between 10k and %d requests', 100 * $growth, $cps[-1]))
            if $growth > RSS_GROWTH_MAX;
    }
    $sc->{rss} = \%rss;
    report_log($sc, $ng);
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 8

# A Redis Cluster of 3 masters, each with a replica, on free loopback ports.
sub cluster_start {
    my @ports = map { free_port() } 1 .. 6;
    for my $port (@ports) {
        my $dir = "$TMP/cluster-$port";
        make_path($dir);
        my $pid = spawn("redis-server cluster $port", "$dir/log", $REDIS,
            '--bind', '127.0.0.1', '--port', $port, '--cluster-port', free_port(), '--dir', $dir,
            '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--cluster-enabled', 'yes',
            '--cluster-config-file', "$dir/nodes.conf", '--cluster-node-timeout', '1000',
            '--repl-diskless-sync-delay', '0');
        my $deadline = time + STARTUP_TIMEOUT;
        sleep 0.05 until time > $deadline || (eval { redis_command_at($port, 'PING') } // '') eq 'PONG';
        die "stress.pl: cluster node $port did not start\n" unless running($pid);
    }
    my $out = `$REDIS_CLI --cluster create @{[ map { "127.0.0.1:$_" } @ports ]} --cluster-replicas 1 --cluster-yes 2>&1`;
    die "stress.pl: redis-cli --cluster create failed:\n$out" if $?;
    my $why = cluster_await(\@ports, S8_SETTLE_TIMEOUT);
    die "stress.pl: the new cluster did not settle within ${\ S8_SETTLE_TIMEOUT } s: $why\n" if $why ne '';
    return @ports;
}

# CLUSTER NODES as { port => { id, master (bool), master_id, flags, epoch,
# slots (count), ranges (the slots as listed), open (slots migrating or
# importing) } }.
sub cluster_nodes {
    my ($port) = @_;
    my %n;
    for my $line (split /\n/, redis_command_at($port, 'CLUSTER', 'NODES')) {
        my ($id, $addr, $flags, $master_id, undef, undef, $epoch, undef, @slots) = split ' ', $line;
        my ($p) = $addr =~ /:(\d+)/;
        my @open = grep { /^\[/ } @slots;
        my @owned = grep { !/^\[/ } @slots;
        my $count = 0;
        $count += /^(\d+)-(\d+)$/ ? $2 - $1 + 1 : 1 for @owned;
        $n{$p} = { id => $id, master => $flags =~ /master/ ? 1 : 0, master_id => $master_id,
                   failed => $flags =~ /fail/ ? 1 : 0, flags => $flags, epoch => $epoch,
                   slots => $count, ranges => "@owned", open => scalar @open };
    }
    return \%n;
}

# Why the cluster on @$ports has not settled yet, '' once it has: every node
# answers and reports cluster_state:ok; all of them give the same CLUSTER
# NODES (the same nodes, roles, masters, config epochs and slots; nobody
# flagged failing, in handshake or without address; no slot migrating or
# importing) and the same CLUSTER INFO counts and current epoch; every node's
# own INFO replication says what that view says (master, or replica of that
# master with its link up). %roles adds what the view must say: port =>
# 'master', or port => the port of its master.
sub cluster_unsettled {
    my ($ports, %roles) = @_;
    my ($view, $counts, $first);
    for my $port (@$ports) {
        my $info = eval { redis_command_at($port, 'CLUSTER', 'INFO') } // return "$port does not answer";
        my %f = $info =~ /^(cluster_\w+):(\S+)/mg;
        return "$port reports cluster_state:" . ($f{cluster_state} // '?') if ($f{cluster_state} // '') ne 'ok';
        my $c = join ' ', map { "$_:" . ($f{$_} // '?') } qw(cluster_slots_assigned cluster_slots_ok
            cluster_slots_pfail cluster_slots_fail cluster_known_nodes cluster_size cluster_current_epoch);
        my $nodes = eval { cluster_nodes($port) } // return "$port does not answer CLUSTER NODES";
        return "$port knows " . keys(%$nodes) . ' nodes, not ' . @$ports if keys %$nodes != @$ports;
        for my $p (sort keys %$nodes) {
            my $n = $nodes->{$p};
            return "$port sees $p as $n->{flags}" if $n->{flags} =~ /fail|handshake|noaddr/;
            return "$port has $n->{open} slots migrating or importing" if $n->{open};
        }
        my %port_of = map { $nodes->{$_}{id} => $_ } keys %$nodes;
        my $v = join "\n", map { my $n = $nodes->{$_};
                                 join ' ', $_, $n->{id}, $n->{master} ? 'master' : 'replica of ' . ($port_of{ $n->{master_id} } // '?'),
                                           "epoch $n->{epoch}", $n->{ranges} } sort keys %$nodes;
        if (!defined $first) {
            ($view, $counts, $first) = ($v, $c, $port);
            for my $p (sort keys %roles) {
                my $want = $roles{$p} eq 'master' ? 'master' : "replica of $roles{$p}";
                return "$port sees $p as " . ($nodes->{$p}{master} ? 'master' : 'replica') . ", not $want"
                    unless $view =~ /^\Q$p\E \S+ \Q$want\E /m;
            }
        }
        return "CLUSTER NODES differs between $first and $port" if $v ne $view;
        return "CLUSTER INFO differs between $first and $port ($counts; $c)" if $c ne $counts;
    }
    for my $port (@$ports) {
        my $repl = eval { redis_command_at($port, 'INFO', 'replication') } // return "$port does not answer INFO";
        my ($role) = $repl =~ /^role:(\w+)/m;
        my ($want) = $view =~ /^\Q$port\E \S+ (master|replica of \d+)/m or return "$port is not in the cluster view";
        if ($want eq 'master') {
            return "$port reports role:" . ($role // '?') . ', not master' if ($role // '') ne 'master';
        } else {
            my ($mport) = $want =~ /(\d+)$/;
            return "$port reports role:" . ($role // '?') . ', not slave' if ($role // '') ne 'slave';
            return "$port replicates " . ($repl =~ /^master_port:(\d+)/m ? $1 : '?') . ", not $mport"
                unless $repl =~ /^master_port:\Q$mport\E\r?$/m;
            return "$port has its link to $mport down" unless $repl =~ /^master_link_status:up\r?$/m;
        }
    }
    return '';
}

# Waits (at most $secs seconds) until the cluster has settled; '' then, else why not.
sub cluster_await {
    my ($ports, $secs, %roles) = @_;
    my $deadline = time + $secs;
    while (1) {
        my $why = cluster_unsettled($ports, %roles);
        return $why if $why eq '' || time > $deadline;
        sleep 0.1;
    }
}

sub cluster_errors {
    my ($ports, $kind) = @_;
    my $n = 0;
    for my $port (@$ports) {
        my $stats = eval { redis_command_at($port, 'INFO', 'errorstats') } // '';
        $n += $1 if $stats =~ /errorstat_$kind:count=(\d+)/;
    }
    return $n;
}

sub scenario8 {
    my $sc = scenario_begin(8, "$S8_KEYS keys through a Redis Cluster (3 masters, 3 replicas) while a master "
                               . "fails over and then $S8_SLOTS slots are resharded");
    my @ports = cluster_start();
    note('cluster nodes on ports ' . join(' ', @ports));
    my $seeds = join ' ', map { "127.0.0.1:$_" } @ports[0 .. 2];
    my $ng = nginx_start('s8', workers => 2,
                         locations => "        location /s8/ { idempotency on; idempotency_redis_cluster $seeds; "
                                    . "proxy_pass http://payments; }\n");
    my @keys = map { { path => "/s8/k$_", key => "s8-key-$_", body => "{\"order\":$_}",
                       query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $S8_KEYS;
    my @events;
    my ($from, $to, $third, $promoted, $to_slots);
    my ($failover_at, $took_over, $failed_over, $next_probe, $unsettled);
    my ($reshard_pid, $reshard_at, $reshard_first, $reshard_tries, $resharded) = (undef, 0, undef, 0, 0);
    my $t_start = time;
    my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); note($events[-1]) };
    # A master fails over to its replica; once every node agrees that it
    # has, slots move between the two other masters. redis-cli --cluster
    # reshard sends CLUSTER SETSLOT to the masters it found when it started,
    # so a master demoted meanwhile would refuse it.
    my $on_tick = sub {
        my ($p) = @_;
        my $progress = $p->{completed};
        my $now = time;
        if (!$failover_at && $progress >= 0.1 * $S8_KEYS) {
            my $nodes = cluster_nodes($ports[0]);
            ($from, $to, $third) = grep { $nodes->{$_}{master} } sort { $a <=> $b } keys %$nodes;
            ($promoted) = grep { !$nodes->{$_}{master} && $nodes->{$_}{master_id} eq $nodes->{$third}{id} } keys %$nodes;
            $to_slots = $nodes->{$to}{slots};
            redis_command_at($promoted, 'CLUSTER', 'FAILOVER');
            $failover_at = $now;
            $event->("CLUSTER FAILOVER on $promoted (the replica of $third) after $progress answers");
        }
        return 0 if !$failover_at || $resharded;
        if (!$failed_over) {
            return 1 if $now < ($next_probe // 0);
            $next_probe = $now + 0.1;
            if (!$took_over && (eval { redis_command_at($promoted, 'INFO', 'replication') } // '') =~ /^role:master/m) {
                $took_over = 1;
                $event->(sprintf '%d is master, %.2f s after CLUSTER FAILOVER', $promoted, $now - $failover_at);
            }
            my $why = cluster_unsettled(\@ports, $promoted => 'master', $third => $promoted);
            if ($why eq '') {
                $failed_over = 1;
                $event->(sprintf 'every node agrees: %d master, %d its replica, cluster_state:ok; %.2f s after CLUSTER FAILOVER',
                         $promoted, $third, $now - $failover_at);
            } elsif (!$took_over && $now - $failover_at > 20) {
                fail($sc, "the replica $promoted did not take over within 20 s");
                $failed_over = $resharded = 1;
            } elsif ($now - $failover_at > S8_SETTLE_TIMEOUT) {
                fail($sc, "the failover did not settle within ${\ S8_SETTLE_TIMEOUT } s: $why");
                $failed_over = $resharded = 1;
            } elsif ($why ne ($unsettled // '')) {
                vnote("not settled: $why");
                $unsettled = $why;
            }
            return 1;
        }
        # The reshard: a run that fails is retried, for the slots still to
        # move, once the cluster has settled again; S8_RESHARD_TRIES runs
        # within S8_RESHARD_TIME seconds at most.
        $reshard_first //= $now;
        my $log = "$TMP/reshard.$reshard_tries.log";
        if ($reshard_pid) {
            if (running($reshard_pid)) {
                return 1 if $now - $reshard_first <= S8_RESHARD_TIME;
                stop_pid($reshard_pid, 'TERM');
                fail($sc, "redis-cli --cluster reshard ran past ${\ S8_RESHARD_TIME } s; see $log");
                $resharded = 1;
                return 0;
            }
            my $status = $EXIT{$reshard_pid} // -1;
            my $owned = eval { cluster_nodes($to)->{$to}{slots} };
            my $moved = defined $owned ? $owned - $to_slots : '?';
            $reshard_pid = undef;
            if ($status == 0) {
                $resharded = 1;
                $event->(sprintf 'resharding done in %.2f s (%s slots moved)', $now - $reshard_at, $moved);
                fail($sc, "$moved slots moved from $from to $to, not $S8_SLOTS") if $moved ne $S8_SLOTS;
                return 0;
            }
            my $err = 'no error message';
            if (open my $lh, '<', $log) {
                while (<$lh>) { $err = $1 if /((?:\[ERR\]|\S+ failed:|ERR ).*\S)/ }
            }
            $err =~ s/\e\[[\d;]*m//g;
            $event->(sprintf 'redis-cli --cluster reshard refused after %.2f s (exit status %s, %s slots moved): %s',
                     $now - $reshard_at, $status, $moved, $err);
            if ($reshard_tries >= S8_RESHARD_TRIES) {
                fail($sc, "redis-cli --cluster reshard refused $reshard_tries times; see $log");
                $resharded = 1;
                return 0;
            }
            $next_probe = $now + 0.2 * $reshard_tries;
            $unsettled = undef;
        }
        return 1 if $now < $next_probe;
        $next_probe = $now + 0.1;
        my $why = $reshard_tries ? cluster_unsettled(\@ports, $promoted => 'master', $third => $promoted) : '';
        my $nodes = $why eq '' ? eval { cluster_nodes($to) } : undef;
        $why = "$to does not answer CLUSTER NODES" if $why eq '' && !$nodes;
        if ($why ne '') {
            if ($now - $reshard_first > S8_RESHARD_TIME) {
                fail($sc, "the cluster did not settle for another reshard within ${\ S8_RESHARD_TIME } s: $why");
                $resharded = 1;
                return 0;
            }
            vnote("not settled: $why") if $why ne ($unsettled // '');
            $unsettled = $why;
            return 1;
        }
        my $slots = $S8_SLOTS - ($nodes->{$to}{slots} - $to_slots);
        if ($slots <= 0) {
            $resharded = 1;
            $event->("$S8_SLOTS slots moved from $from to $to");
            return 0;
        }
        $reshard_tries++;
        $log = "$TMP/reshard.$reshard_tries.log";
        $reshard_pid = spawn('redis-cli --cluster reshard', $log, $REDIS_CLI, '--cluster', 'reshard',
                             "127.0.0.1:$ports[0]", '--cluster-from', $nodes->{$from}{id}, '--cluster-to',
                             $nodes->{$to}{id}, '--cluster-slots', $slots, '--cluster-yes');
        $reshard_at = $now;
        $event->("resharding $slots slots from $from to $to (redis-cli pid $reshard_pid, run $reshard_tries) "
                 . "after $progress answers");
        return 1;
    };
    my $st = keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                        max_attempts => 60, key_time => 90, time_limit => 120);
    fail($sc, "the load did not finish in time") unless $st->{completed};
    fail($sc, "the load finished before the reshard and the failover did") unless $resharded && $failed_over;
    note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
         $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
    tally_executions($sc, \@keys);
    my ($tally, $not, $differ) = replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
    fail($sc, scalar(@$not) . " keys did not replay") if @$not;
    fail($sc, scalar(@$differ) . " replays differ from the first answer") if @$differ;
    push @{ $sc->{notes} }, @events;
    push @{ $sc->{notes} }, sprintf('cluster answers to the gateway and to this script: MOVED %d, ASK %d',
                                    cluster_errors(\@ports, 'MOVED'), cluster_errors(\@ports, 'ASK'));
    push @{ $sc->{notes} }, 'replays: ' . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
    nginx_stop($ng);
    report_log($sc, $ng);
    scenario_end($sc);
}

# ---------------------------------------------------------------- scenario 9

sub scenario9 {
    my $sc = scenario_begin(9, "$S9_KEYS keys through Redis Sentinel while the master fails over to its replica");
    my ($master, $replica, $sentinel) = (free_port(), free_port(), free_port());
    my @common = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no');
    for my $node ([$master], [$replica, '--replicaof', '127.0.0.1', $master]) {
        my ($port, @extra) = @$node;
        make_path("$TMP/sentinel-$port");
        spawn("redis-server $port", "$TMP/sentinel-$port/log", $REDIS, @common, '--port', $port,
              '--dir', "$TMP/sentinel-$port", @extra);
    }
    my $conf = "$TMP/sentinel.conf";
    open my $fh, '>', $conf or die "stress.pl: $conf: $!\n";
    print {$fh} "bind 127.0.0.1\nport $sentinel\ndir $TMP\nsentinel monitor s9 127.0.0.1 $master 1\n"
        . "sentinel down-after-milliseconds s9 1000\nsentinel failover-timeout s9 10000\n";
    close $fh;
    my $deadline = time + 30;
    sleep 0.1 until time > $deadline
        || (eval { redis_command_at($replica, 'INFO', 'replication') } // '') =~ /master_link_status:up/;
    spawn('redis-sentinel', "$TMP/sentinel.log", $REDIS, $conf, '--sentinel');
    # the sentinel has seen the replica (it reports its count) before the load starts
    sleep 0.1 until time > $deadline || `$REDIS_CLI -p $sentinel SENTINEL MASTER s9 2>/dev/null` =~ /num-slaves\s+1/;
    note("master $master, replica $replica, sentinel $sentinel");
    my $ng = nginx_start('s9', workers => 2,
                         locations => "        location /s9/ { idempotency on; idempotency_redis_sentinel s9 "
                                    . "127.0.0.1:$sentinel; proxy_pass http://payments; }\n");
    my @keys = map { { path => "/s9/k$_", key => "s9-key-$_", body => "{\"order\":$_}",
                       query => ($_ % 4 == 0 ? '?sleep=0.2' : '?sleep=0.02') } } 1 .. $S9_KEYS;
    my @events;
    my ($failover_at, $switched);
    my $t_start = time;
    my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); note($events[-1]) };
    my $on_tick = sub {
        my ($p) = @_;
        my $now = time;
        if (!$failover_at && $p->{completed} >= 0.2 * $S9_KEYS) {
            # Writes pause on the old master first, so that nothing it
            # acknowledges is lost when the replica takes over (a forced
            # failover without it may lose the last writes: Redis losing
            # data, outside the module's guarantee).
            redis_command_at($master, 'CLIENT', 'PAUSE', 5000, 'WRITE');
            redis_command_at($sentinel, 'SENTINEL', 'FAILOVER', 's9');
            $failover_at = $now;
            $event->("CLIENT PAUSE WRITE on $master and SENTINEL FAILOVER after $p->{completed} answers");
        }
        if ($failover_at && !$switched) {
            my $named = `$REDIS_CLI -p $sentinel SENTINEL get-master-addr-by-name s9 2>/dev/null`;
            if ($named =~ /\b$replica\b/) {
                $switched = 1;
                $event->(sprintf 'the sentinel names %d master, %.2f s after the failover began', $replica, $now - $failover_at);
            } elsif ($now - $failover_at > 30) {
                fail($sc, 'the sentinel did not promote the replica within 30 s');
                $switched = 1;
            }
        }
        return !$switched;
    };
    my $st = keyed_load(sc => $sc, keys => \@keys, port => $ng->{port}, on_tick => $on_tick,
                        max_attempts => 100, key_time => 90, time_limit => 120);
    fail($sc, "the load did not finish in time") unless $st->{completed};
    fail($sc, "the load finished before the failover did") unless $switched;
    note(sprintf 'load: %d keys answered 2xx, %d gave up, %d attempts (%d retries)',
         $st->{done}, $st->{gave_up}, $st->{attempts}, $st->{retries});
    tally_executions($sc, \@keys);
    my ($tally, $not, $differ) = replay_check(sc => $sc, keys => \@keys, port => $ng->{port}, within => 5);
    fail($sc, scalar(@$not) . " keys did not replay") if @$not;
    fail($sc, scalar(@$differ) . " replays differ from the first answer") if @$differ;
    push @{ $sc->{notes} }, @events;
    push @{ $sc->{notes} }, 'replays: ' . join(', ', map { "$_: $tally->{$_}" } sort keys %$tally);
    nginx_stop($ng);
    report_log($sc, $ng);
    scenario_end($sc);
}

# ---------------------------------------------------------------- fault proxy
#
# A loopback TCP proxy to Redis that injects faults into its replies
# (scenario 10). It runs in a forked process, steered over a socket pair
# (fault_proxy_mode, fault_proxy_stats). Commands always reach Redis; each
# reply (one RESP value) meets the mode in force when it arrives:
#   pass   forwarded;
#   drop   read and not forwarded, and nothing more is forwarded on that
#          connection (later replies would be taken for this one's): nginx
#          sees a reply timeout;
#   stall  held for ARG ms, then forwarded if nginx is still connected
#          (replies after it queue behind it);
#   cut    half of it forwarded, then both sides closed: nginx sees the
#          connection close mid-reply.

# The end of the RESP value starting at $pos in $$buf; -1 while incomplete.
# What is not RESP is taken whole.
sub resp_end {
    my ($buf, $pos) = @_;
    my $need = 1;
    while ($need > 0) {
        my $le = index($$buf, "\r\n", $pos);
        return -1 if $le < 0;
        my $type = substr($$buf, $pos, 1);
        my $arg = substr($$buf, $pos + 1, $le - $pos - 1);
        $pos = $le + 2;
        $need--;
        if ($type eq '$') {
            return length $$buf unless $arg =~ /^-?\d+$/;
            next if $arg < 0;
            return -1 if length($$buf) < $pos + $arg + 2;
            $pos += $arg + 2;
        } elsif ($type eq '*') {
            return length $$buf unless $arg =~ /^-?\d+$/;
            $need += $arg if $arg > 0;
        } elsif ($type !~ /^[-+:]$/) {
            return length $$buf;
        }
    }
    return $pos;
}

sub fault_proxy_start {
    my ($target) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 128, Proto => 'tcp', ReuseAddr => 1,
    ) or die "stress.pl: cannot listen for the fault proxy: $!\n";
    socketpair(my $ours, my $theirs, AF_UNIX, SOCK_STREAM, PF_UNSPEC)
        or die "stress.pl: socketpair: $!\n";
    my $pid = fork;
    die "stress.pl: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP ALRM);
        close $ours;
        my $ok = eval { fault_proxy_loop($listen, $theirs, $target); 1 };
        print STDERR "fault proxy: $@" unless $ok;
        POSIX::_exit($ok ? 0 : 1);
    }
    close $theirs;
    $CHILD{$pid} = $OWNED{$pid} = 'fault proxy';
    my $px = { pid => $pid, port => $listen->sockport, ctl => $ours, buf => '' };
    close $listen;
    return $px;
}

sub fault_proxy_loop {
    my ($listen, $ctl, $target) = @_;
    my $nonblock = sub { my $fl = fcntl($_[0], F_GETFL, 0); fcntl($_[0], F_SETFL, $fl | O_NONBLOCK) };
    $nonblock->($listen);
    my ($mode, $hold) = ('pass', 0);
    my %st = map { $_ => 0 } qw(connections commands replies forwarded dropped stalled late cut);
    my @pairs;
    my $ctl_buf = '';
    my $deadline = time + 1800;     # the parent ends it long before
    my $close = sub {
        my ($pr) = @_;
        return if $pr->{closed};
        $pr->{closed} = 1;
        close $pr->{c};
        close $pr->{s};
    };
    while (time < $deadline) {
        @pairs = grep { !$_->{closed} } @pairs;
        my $now = time;
        my ($rin, $win) = ('', '');
        vec($rin, fileno $listen, 1) = 1;
        vec($rin, fileno $ctl, 1) = 1;
        my $timeout = 0.05;
        for my $pr (@pairs) {
            vec($rin, fileno $pr->{c}, 1) = 1;
            vec($rin, fileno $pr->{s}, 1) = 1 unless $pr->{cutting};
            vec($win, fileno $pr->{c}, 1) = 1 if length $pr->{down};
            vec($win, fileno $pr->{s}, 1) = 1 if length $pr->{up};
            if (@{ $pr->{q} }) {
                my $until = $pr->{q}[0][1] - $now;
                $timeout = $until < 0 ? 0 : $until if $until < $timeout;
            }
        }
        my ($rout, $wout) = ($rin, $win);
        my $n = select($rout, $wout, undef, $timeout);
        next if $n < 0 && $! == EINTR;
        $now = time;
        if (vec($rout, fileno $ctl, 1)) {
            my $got = sysread($ctl, $ctl_buf, 4096, length $ctl_buf);
            return if defined $got && $got == 0;    # the parent is gone
            while ($ctl_buf =~ s/^([^\n]*)\n//) {
                my ($cmd, @arg) = split ' ', $1;
                if (($cmd // '') eq 'mode') {
                    ($mode, $hold) = ($arg[0], ($arg[1] // 0) / 1000);
                    syswrite($ctl, "ok\n");
                } elsif (($cmd // '') eq 'stats') {
                    syswrite($ctl, join(' ', 'stats', map { "$_=$st{$_}" } sort keys %st) . "\n");
                }
            }
        }
        if (vec($rout, fileno $listen, 1)) {
            while (my $c = $listen->accept) {
                my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target, Proto => 'tcp', Timeout => 2);
                if (!$s) { close $c; next }
                $nonblock->($_) for $c, $s;
                setsockopt($_, IPPROTO_TCP, TCP_NODELAY, 1) for $c, $s;
                $st{connections}++;
                push @pairs, { c => $c, s => $s, up => '', down => '', cmds => '', replies => '', q => [] };
            }
        }
        for my $pr (@pairs) {
            next if $pr->{closed};
            if (vec($rout, fileno $pr->{c}, 1)) {     # nginx -> Redis: always passed on
                my $got = sysread($pr->{c}, my $buf, 65536);
                if (!defined $got) { $close->($pr) unless $! == EAGAIN || $! == EINTR; next }
                if ($got == 0) { $close->($pr); next }
                $pr->{up} .= $buf;
                $pr->{cmds} .= $buf;
                while ((my $end = resp_end(\$pr->{cmds}, 0)) > 0) {
                    substr($pr->{cmds}, 0, $end, '');
                    $st{commands}++;
                }
            }
            if (!$pr->{cutting} && vec($rout, fileno $pr->{s}, 1)) {     # Redis -> nginx: the faults
                my $got = sysread($pr->{s}, my $buf, 65536);
                if (!defined $got) { $close->($pr) unless $! == EAGAIN || $! == EINTR; next }
                if ($got == 0) { $close->($pr); next }
                $pr->{replies} .= $buf;
                while ((my $end = resp_end(\$pr->{replies}, 0)) > 0) {
                    my $reply = substr($pr->{replies}, 0, $end, '');
                    $st{replies}++;
                    if ($pr->{dead} || $mode eq 'drop') {
                        $st{dropped}++;
                        $pr->{dead} = 1;
                    } elsif ($mode eq 'cut') {
                        $st{cut}++;
                        push @{ $pr->{q} }, [substr($reply, 0, int(length($reply) / 2) || 1), $now, 0];
                        $pr->{dead} = $pr->{cutting} = 1;
                    } elsif ($mode eq 'stall') {
                        $st{stalled}++;
                        push @{ $pr->{q} }, [$reply, $now + $hold, 1];
                    } else {
                        push @{ $pr->{q} }, [$reply, $now, 0];
                    }
                }
            }
            while (@{ $pr->{q} } && $pr->{q}[0][1] <= $now) {
                my $item = shift @{ $pr->{q} };
                $pr->{down} .= $item->[0];
                $st{ $item->[2] ? 'late' : 'forwarded' }++ unless $pr->{cutting};
            }
            for my $dir (['down', 'c'], ['up', 's']) {
                my ($b, $sock) = @$dir;
                next unless length $pr->{$b};
                my $w = syswrite($pr->{$sock}, $pr->{$b});
                if (!defined $w) { $close->($pr) unless $! == EAGAIN || $! == EINTR; last }
                substr($pr->{$b}, 0, $w, '');
            }
            $close->($pr) if $pr->{cutting} && !$pr->{closed} && !length $pr->{down} && !@{ $pr->{q} };
        }
    }
}

# One line to the proxy and its answer line.
sub fault_proxy_ask {
    my ($px, $line) = @_;
    syswrite($px->{ctl}, "$line\n") or die "stress.pl: fault proxy: write: $!\n";
    my $deadline = time + 5;
    while ($px->{buf} !~ /\n/) {
        my $left = $deadline - time;
        die "stress.pl: the fault proxy did not answer '$line'\n" if $left <= 0;
        my $rin = '';
        vec($rin, fileno $px->{ctl}, 1) = 1;
        next unless select($rin, undef, undef, $left) > 0;
        my $n = sysread($px->{ctl}, $px->{buf}, 4096, length $px->{buf});
        die "stress.pl: the fault proxy is gone\n" if defined $n && $n == 0;
    }
    $px->{buf} =~ s/^([^\n]*)\n//;
    return $1;
}

sub fault_proxy_mode { my ($px, $mode, $arg) = @_; fault_proxy_ask($px, "mode $mode" . ($arg ? " $arg" : '')) }

sub fault_proxy_stats {
    my ($px) = @_;
    my %st = fault_proxy_ask($px, 'stats') =~ /(\w+)=(\d+)/g;
    $st{faults} = ($st{dropped} // 0) + ($st{stalled} // 0) + ($st{cut} // 0);
    return \%st;
}

# ---------------------------------------------------------------- scenario 10

# What the module keeps under $prefix in Redis: claims, responses,
# unreplayable marks and other values (the kind byte after "IDM\x01").
sub redis_kinds {
    my ($prefix) = @_;
    my $lua = q{
        local n = {0, 0, 0, 0}
        local cursor = '0'
        repeat
            local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
            cursor = r[1]
            for _, k in ipairs(r[2]) do
                local v = redis.call('GET', k)
                local kind = v and string.byte(v, 5) or 0
                if kind >= 1 and kind <= 3 then n[kind] = n[kind] + 1 else n[4] = n[4] + 1 end
            end
        until cursor == '0'
        return table.concat(n, ' ')
    };
    my @n = split ' ', redis_command('EVAL', $lua, 0, "$prefix*");
    return { claim => $n[0], response => $n[1], unreplayable => $n[2], other => $n[3] };
}

sub scenario10 {
    # one reload per fault, in this order
    my @faults = (['drop'], ['stall', S10_STALL], ['cut'], ['drop'], ['stall', S10_STALL]);
    my $sc = scenario_begin(10, "$S10_KEYS keys and a retry of each through a proxy that drops, stalls and cuts "
        . "Redis's replies; nginx reloaded " . @faults . ' times during the faults (idempotency_redis_timeout '
        . S10_REDIS_TIMEOUT . 'ms, idempotency_lock_ttl ' . S10_LOCK_TTL . 's, worker_shutdown_timeout '
        . S10_SHUTDOWN . 's)');
    my $px = fault_proxy_start($REDIS_PORT);
    note("fault proxy pid $px->{pid} on 127.0.0.1:$px->{port}, to Redis on $REDIS_PORT");
    my $prefix = 'idem-s10:';
    my $ng = nginx_start('s10', workers => 2, main => 'worker_shutdown_timeout ' . S10_SHUTDOWN . 's;',
        locations => "        location /s10/ { idempotency on; idempotency_redis 127.0.0.1:$px->{port}; "
                   . 'idempotency_redis_timeout ' . S10_REDIS_TIMEOUT . 'ms; idempotency_lock_ttl '
                   . S10_LOCK_TTL . "s; idempotency_key_prefix $prefix; proxy_pass http://payments; }\n");
    my $master = $ng->{pid};
    # a fifth of the keys keep the upstream long enough for their response
    # to come back while the Redis connection is down or the worker exiting
    my @keys = map { { path => "/s10/k$_", key => "s10-key-$_", body => "{\"order\":$_}",
                       query => '?sleep=' . ($_ % 10 == 0 ? 0.8 : $_ % 10 == 5 ? 0.4 : 0.02) } } 1 .. $S10_KEYS;
    my $request = sub {
        my ($k, $kind) = @_;
        return { port => $ng->{port}, method => 'POST', path => $k->{path} . $k->{query}, timeout => 10,
                 close => 1, k => $k, kind => $kind, body => $k->{body},
                 headers => [['Idempotency-Key', $k->{key}], ['Content-Type', 'application/json']] };
    };

    # The load: each key once, and once more idempotency_lock_ttl + 1 s
    # after its answer (a claim its first attempt left behind has expired
    # by then). Fault i begins once i/(faults + 1) of the keys were sent;
    # from then on a third as many more are sent until its old workers are
    # gone and Redis answers through nginx again (probes, keys of their
    # own, one at a time 25 ms apart, until 3 in a row are executed), so
    # that every fault and reload meets the load and most keys are sent
    # between them.
    my $t_start = time;
    my @events;
    my $event = sub { push @events, sprintf('%.2fs: %s', time - $t_start, $_[0]); note($events[-1]) };
    my $gate = sub { int(($_[0] + 1) * @keys / (@faults + 1)) };
    my $fault_keys = int(@keys / (@faults + 1) / 3);
    my ($sent, $cycle, $state, $base, $t_fault, $t_hup, $next_poll, $sent_at_fault, @old) = (0, 0, 'pass', undef, 0, 0, 0, 0);
    my ($probes, $probing, $probe_ok, $t_pass) = (0, 0, 0, 0);
    my (@exit_times, @recovery_times, @unexpected);
    my $p = pool_new(
        concurrency => S10_CONCURRENCY,
        on_done => sub {
            my ($req, $res, $pool) = @_;
            my $k = $req->{k};
            count_answer($sc, $res);
            if ($req->{kind} eq 'probe') {
                $probing = 0;
                $probe_ok = !$res->{error} && $res->{status} =~ /^2/ ? $probe_ok + 1 : 0;
                return;
            }
            $k->{ $req->{kind} } = $res;
            # when it was answered: fault (before the SIGHUP), reloading, reloaded
            # (new workers up, fault still on), draining (fault off), or between
            $k->{"$req->{kind}_at"} = $state ne 'pass' ? 'reload ' . ($cycle + 1) . ", $state"
                                    : $cycle < @faults ? 'before reload ' . ($cycle + 1) : 'after the reloads';
            pool_submit($pool, $request->($k, 'retry'), S10_LOCK_TTL + 1) if $req->{kind} eq 'first';
        },
        on_tick => sub {
            my ($pool) = @_;
            my $limit = $cycle >= @faults ? @keys : $state eq 'pass' ? $gate->($cycle)
                      : $sent_at_fault + $fault_keys;
            $limit = @keys if $limit > @keys;
            while ($sent < $limit && @{ $pool->{ready} } < $pool->{conc}) {
                pool_submit($pool, $request->($keys[ $sent++ ], 'first'));
            }
            return 0 if $cycle >= @faults && $sent >= @keys;
            my $now = time;
            if ($cycle >= @faults) {
                # every fault ran; the rest of the keys are being sent
            } elsif ($state eq 'pass' && $sent >= $gate->($cycle)) {
                my ($mode, $arg) = @{ $faults[$cycle] };
                fault_proxy_mode($px, $mode, $arg);
                $base = fault_proxy_stats($px);
                ($state, $t_fault, $sent_at_fault) = ('fault', $now, $sent);
                $event->("fault $mode" . ($arg ? " ${arg}ms" : '') . " begins after $sent keys were sent");
            } elsif ($state eq 'fault' && $now >= $next_poll) {
                # SIGHUP once the fault has hit a few replies (old workers
                # then exit with commands unanswered), or after 2 s anyway
                $next_poll = $now + 0.02;
                my $st = fault_proxy_stats($px);
                my $hit = $st->{faults} - $base->{faults};
                if ($hit >= 3 || $now - $t_fault > 2) {
                    @old = workers_of($master);
                    kill 'HUP', $master;
                    ($state, $t_hup) = ('reloading', $now);
                    $event->(sprintf 'SIGHUP to master %d (old workers %s), %d replies hit by the fault, %d requests in flight',
                                     $master, "@old", $hit, $pool->{nactive});
                }
            } elsif ($state eq 'reloading') {
                my %was = map { $_ => 1 } @old;
                my @new = grep { !$was{$_} } workers_of($master);
                if (@new >= 2) {
                    $event->(sprintf 'new workers %s up, %.2f s after SIGHUP', "@new", $now - $t_hup);
                    $state = 'reloaded';
                } elsif ($now - $t_hup > 15) {
                    fail($sc, 'no new workers 15 s after SIGHUP ' . ($cycle + 1));
                    $state = 'reloaded';
                }
            }
            if ($state eq 'reloaded' || $state eq 'draining') {
                if (!defined $exit_times[$cycle] && !grep { running($_) } @old) {
                    $exit_times[$cycle] = $now - $t_hup;
                    $event->(sprintf 'old workers %s gone, %.2f s after SIGHUP', "@old", $now - $t_hup);
                }
            }
            if ($state eq 'reloaded' && $now - $t_hup >= S10_FAULT_AFTER) {
                fault_proxy_mode($px, 'pass');
                my $st = fault_proxy_stats($px);
                $event->(sprintf 'fault %s ends: %d replies dropped, %d stalled, %d connections cut during it',
                                 $faults[$cycle][0], map { $st->{$_} - $base->{$_} } qw(dropped stalled cut));
                ($state, $t_pass, $probe_ok) = ('draining', $now, 0);
            } elsif ($state eq 'draining') {
                # old workers gone (or given up on) and Redis reachable again
                if (!defined $exit_times[$cycle] && $now - $t_hup > S10_SHUTDOWN + 3) {
                    my @left = grep { running($_) } @old;
                    fail($sc, "old workers @left still running " . (S10_SHUTDOWN + 3) . ' s after SIGHUP ' . ($cycle + 1)
                              . ' (worker_shutdown_timeout ' . S10_SHUTDOWN . 's)');
                    $exit_times[$cycle] = -1;
                }
                if ($probe_ok < 3 && !$probing) {
                    if ($now - $t_pass > 10) {
                        fail($sc, 'Redis did not answer through nginx within 10 s of the end of fault ' . ($cycle + 1));
                        $probe_ok = 3;
                        $recovery_times[$cycle] = -1;
                    } else {
                        $probing = 1;
                        $probes++;
                        pool_submit($pool, $request->({ path => "/s10/probe/$probes", query => '?sleep=0.02',
                                                        key => "s10-probe-$probes", body => '{}' }, 'probe'),
                                    $probes > 1 ? 0.025 : 0);
                    }
                }
                $recovery_times[$cycle] //= $now - $t_pass if $probe_ok >= 3;
                ($state, $cycle) = ('pass', $cycle + 1) if defined $exit_times[$cycle] && $probe_ok >= 3;
            }
            return 1;
        },
    );
    my $completed = pool_run($p, time + S10_LOAD_LIMIT);
    fault_proxy_mode($px, 'pass');
    my $pst = fault_proxy_stats($px);
    fail($sc, 'the load did not finish within ' . S10_LOAD_LIMIT . ' s') unless $completed;
    fail($sc, "only $cycle of " . @faults . ' faults and reloads ran') if $cycle < @faults;
    fail($sc, "the master $master is gone") unless running($master);
    note(sprintf 'load done in %.1f s: %d first attempts, %d retries', time - $t_start,
         scalar(grep { $_->{first} } @keys), scalar(grep { $_->{retry} } @keys));

    # Until every claim has expired (one whose store or release was lost)
    # or been resolved: then nothing holds a key any more.
    my $t_settle = time;
    my $kinds = redis_kinds($prefix);
    while ($kinds->{claim} > 0 && time - $t_settle < S10_LOCK_TTL + 3) {
        sleep 0.1;
        $kinds = redis_kinds($prefix);
    }
    push @{ $sc->{notes} }, sprintf('Redis %.2f s after the load: %d claims, %d responses, %d unreplayable, %d other',
        time - $t_settle, @$kinds{qw(claim response unreplayable other)});
    fail($sc, "$kinds->{claim} claims still held " . (S10_LOCK_TTL + 3) . ' s after the load') if $kinds->{claim};

    # Each key once more: a replay, or the first execution of a key that never ran.
    my $before = upstream_counts(map { $_->{path} } @keys);
    my $fp = pool_new(concurrency => S10_CONCURRENCY, on_done => sub {
        my ($req, $res) = @_;
        count_answer($sc, $res);
        $req->{k}{final} = $res;
    });
    pool_submit($fp, $request->($_, 'final')) for @keys;
    pool_run($fp, time + 60);
    my $after = upstream_counts(map { $_->{path} } @keys);

    # The verdict, key by key.
    my $class = sub {
        my ($res, $executed_before) = @_;
        return 'none' unless $res;
        return answer_label($res) if $res->{error};
        return 'replay' if $res->{status} =~ /^2/ && ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
        return $executed_before ? 'second execution' : 'first execution' if $res->{status} =~ /^2/;
        return "$res->{status}";
    };
    my (%tally, @dups, @differ, @slow);
    for my $k (@keys) {
        my $n = $after->{ $k->{path} };
        $sc->{executions} += $n;
        if ($n > 1) { $sc->{duplicates} += $n - 1; push @dups, $k }
        my $first = $class->($k->{first}, 0);
        my $retry = $class->($k->{retry}, $n > 1);
        my $final = $class->($k->{final}, $before->{ $k->{path} } > 0);
        $tally{first}{$first}++;
        $tally{retry}{$retry}++;
        $tally{final}{$final}++;
        push @unexpected, "$k->{path}: first attempt $first" unless $first =~ /^(?:first execution|503)$/;
        push @unexpected, "$k->{path}: retry $retry" unless $retry =~ /^(?:replay|409|410|503|first execution)$/;
        push @unexpected, "$k->{path}: final pass $final" unless $final =~ /^(?:replay|409|410|503|first execution)$/;
        push @slow, $k->{first}{elapsed} if $k->{first} && !$k->{first}{error};
        # a replay is the first client's answer
        my ($orig) = grep { $_ && !$_->{error} && $_->{status} =~ /^2/ } map { $k->{$_} } qw(first retry final);
        push @differ, $k if $orig && grep { $_ && $_ != $orig && !$_->{error} && $_->{status} =~ /^2/
                                            && $_->{body} ne $orig->{body} } map { $k->{$_} } qw(retry final);
    }
    if (@dups) {
        fail($sc, scalar(@dups) . " keys executed more than once ($sc->{duplicates} duplicate executions)");
        for my $k (@dups[0 .. ($#dups < 9 ? $#dups : 9)]) {
            note(sprintf '  duplicate: %s: %d executions; first attempt %s (%s), retry %s (%s), final pass %s',
                 $k->{path}, $after->{ $k->{path} }, answer_label($k->{first} // { error => 'none' }),
                 $k->{first_at} // '?', answer_label($k->{retry} // { error => 'none' }), $k->{retry_at} // '?',
                 answer_label($k->{final} // { error => 'none' }));
        }
    }
    if (@unexpected) {
        fail($sc, scalar(@unexpected) . ' answers other than allowed (first attempt: its execution or 503; '
                  . 'retry: a replay, 409, 410, 503 or the first execution)');
        note("  $_") for @unexpected[0 .. ($#unexpected < 9 ? $#unexpected : 9)];
    }
    fail($sc, scalar(@differ) . " keys answered 2xx with another body than their first 2xx") if @differ;
    my $logged = upstream_log_executions('/s10/k');
    fail($sc, "upstream log shows $logged executions, /_count says $sc->{executions}") if $logged != $sc->{executions};
    my @elapsed = sort { $a <=> $b } @slow;
    push @{ $sc->{notes} }, "$_: " . answers_text($tally{$_}) for qw(first retry final);
    push @{ $sc->{notes} }, sprintf('first attempts answered: median %.3f s, slowest %.2f s, %d over 1 s',
        $elapsed[ @elapsed / 2 ] // 0, $elapsed[-1] // 0, scalar grep { $_ > 1 } @elapsed);
    push @{ $sc->{notes} }, sprintf('reloads %d; old workers gone %s s after SIGHUP; Redis answered through nginx '
        . '%s s after the end of the fault (%d probes)', scalar @exit_times,
        join(', ', map { ($_ // -1) < 0 ? 'never' : sprintf '%.2f', $_ } @exit_times),
        join(', ', map { ($_ // -1) < 0 ? 'never' : sprintf '%.2f', $_ } @recovery_times), $probes);
    push @{ $sc->{notes} }, sprintf('faults injected %d: %d replies dropped, %d stalled %d ms (%d of them delivered late), '
        . '%d connections cut mid-reply; proxy: %d connections, %d commands, %d replies, %d forwarded',
        $pst->{faults}, $pst->{dropped}, $pst->{stalled}, S10_STALL, $pst->{late}, $pst->{cut},
        $pst->{connections}, $pst->{commands}, $pst->{replies}, $pst->{forwarded});
    push @{ $sc->{notes} }, @events;
    nginx_stop($ng);
    stop_pid($px->{pid}, 'TERM');
    # A worker that exits with a status other than 0 died too (an ASan
    # abort, exit(1) from a fatal error): nginx logs that as a notice. Lines
    # that are not nginx's own (glibc's "corrupted double-linked list", ...)
    # come before a crash.
    if (open my $fh, '<', $ng->{error_log}) {
        my @lines = <$fh>;
        chomp @lines;
        my @died = grep { /worker process \d+ exited with code [1-9]/ } @lines;
        fail($sc, scalar(@died) . ' worker(s) exited with a status other than 0') if @died;
        note("  $_") for @died[0 .. ($#died < 9 ? $#died : 9)];
        my %foreign;
        $foreign{$_}++ for grep { !m{^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[} && /\S/ } @lines;
        push @{ $sc->{notes} }, "error log, not from nginx: $foreign{$_} x $_" for sort keys %foreign;
    }
    my (undef, $errors) = report_log($sc, $ng);
    my $took = time - $sc->{start};
    fail($sc, sprintf 'the scenario took %.0f s, more than %d s', $took, S10_TIME_LIMIT) if $took > S10_TIME_LIMIT;
    scenario_end($sc);
}

# ---------------------------------------------------------------- main

sub main {
    alarm 900;
    $TMP = tempdir('idempotency-stress-XXXXXX', TMPDIR => 1);
    chmod 0755, $TMP;           # nginx workers run as another user when we are root
    $REDIS_DIR = "$TMP/redis";
    make_path($REDIS_DIR);
    say_("nginx-idempotency stress run: nginx $NGINX, $REDIS, module $MODULE");
    say_("temp dir $TMP");
    redis_start();
    note("redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (appendonly yes)");
    upstream_start();
    note("upstream.pl pid $UP_PID on 127.0.0.1:$UP_PORT");

    my @plan = (
        ['1', sub { scenario1('1a', 0); scenario1('1b', 1) }],
        ['2', \&scenario2],
        ['3', \&scenario3],
        ['4', \&scenario4],
        ['5', \&scenario5],
        ['6', \&scenario6],
        ['7', sub { scenario1('7a', 0, 1); scenario1('7b', 1, 1) }],
        ['8', \&scenario8],
        ['9', \&scenario9],
        ['10', \&scenario10],
        ['11', sub { scenario1('11a', 0, 'tls'); scenario1('11b', 1, 'tls') }],
    );
    for my $step (@plan) {
        next unless $want{ $step->[0] };
        my $ok = eval { $step->[1]->(); 1 };
        if (!$ok) {
            my $err = $@;
            chomp $err;
            my $sc = { id => $step->[0], title => 'aborted', start => time, failures => ["aborted: $err"],
                       answers => {}, requests => 0, executions => 0, duplicates => 0, notes => [] };
            note("FAIL: scenario $step->[0] aborted: $err");
            scenario_end($sc);
            for my $ng (@NGINX_ALL) { nginx_stop($ng) }
            last if $err =~ /overall time limit/;
        }
        if (!running($REDIS_PID)) { note('redis-server is gone; restarting it'); redis_start() }
    }

    say_("");
    say_("== Summary (total " . sprintf('%.1f', time - $T0) . " s)");
    my $fmt = "%-4s %9s %11s %11s %9s  %-6s %s\n";
    printf $fmt, 'scen', 'requests', 'executions', 'duplicates', 'seconds', 'result', 'answers';
    for my $sc (@RESULTS) {
        printf $fmt, $sc->{id}, $sc->{requests}, $sc->{executions}, $sc->{duplicates},
            sprintf('%.1f', $sc->{duration}), $sc->{ok} ? 'PASS' : 'FAIL', answers_text($sc->{answers});
    }
    my @failed = grep { !$_->{ok} } @RESULTS;
    if (@failed) {
        say_("");
        say_("FAILED:");
        for my $sc (@failed) { say_("  scenario $sc->{id}: $_") for @{ $sc->{failures} } }
        $opt{keep} = 1;       # keep the logs for a look
        return 1;
    }
    say_("all guarantees held");
    return 0;
}

my $rc = main();
cleanup();
exit $rc;
