# IdempotencyTest.pm — per-test-file fixtures for the t/*.t suite:
# a private redis-server and a private scripts/upstream.pl, both on free
# loopback ports, plus small helpers to talk to them.
#
# Usage (at the top of a Test::Nginx::Socket file; this module does not
# depend on Test::Nginx):
#
#     use lib 't/lib';
#     use IdempotencyTest;             # starts Redis + upstream right here
#     use Test::Nginx::Socket 'no_plan';
#
# `use IdempotencyTest;` starts the fixtures at import time (once per
# process; not under `perl -c`) and exports the functions below. To load it
# without starting anything, write `use IdempotencyTest ();` and call
# IdempotencyTest::start() yourself. start() is idempotent.
#
# Environment set for the nginx configs:
#   TEST_NGINX_REDIS_PORT     the test Redis port (127.0.0.1)
#   TEST_NGINX_UPSTREAM_PORT  the upstream.pl port (127.0.0.1)
#   TEST_NGINX_SERVER_PORT    nginx's port: a free port, unless already set
#   TEST_NGINX_MODULE         <repo>/build/ngx_http_idempotency_module.so,
#                             unless already set
#   TEST_NGINX_REPO           the repository root
# Honoured: TEST_REDIS_SERVER (redis-server binary; default: from PATH).
#
# Exported functions:
#   redis_command(@args)      one command to the test Redis; returns the
#                             reply: scalar (status/int/bulk), undef (nil),
#                             arrayref (array). An error reply dies with
#                             "redis error: ..."; errors nested in arrays are
#                             IdempotencyTest::RedisError objects.
#   upstream_count($path)     executions of $path so far (integer)
#   upstream_log()            upstream stdout so far ("execution N ..." lines)
#   wait_until($code, $secs)  polls $code (default 10 s) with a small backoff;
#                             returns its first true value, or false on timeout
#   redis_port(), upstream_port(), redis_pid()
#   stop_redis([$signal])     stops Redis (default TERM; e.g. 'KILL'), waits
#   start_redis()             (re)starts Redis on the same port, waits for PING
#   start()                   see above
#   redis_key($key, [$scope], [$prefix], [$server])
#                             the Redis key the module derives for a client
#                             key (default scope "", prefix "idem:", and the
#                             virtual server "localhost", Test::Nginx's
#                             server_name; '' for a server block without one)
#   error_log_has($text, [$secs])
#                             (not exported) waits until nginx's error log
#                             has a line with $text; true when it has
#   stored_kind($redis_key)   what the module keeps there: undef, 'claim',
#                             'response', 'unreplayable' or 'foreign'
#   send_request($raw)        writes a raw HTTP request to the nginx under
#                             test and returns the open socket: the test
#                             decides when the client reads or goes away
#   start_in_flight($uri, $key)
#                             POSTs "x" to $uri with the key and returns the
#                             open socket once the upstream has started on it
#                             (the original of an in-flight duplicate)
#   read_response($sock)      (not exported) reads a response to the end of
#                             the connection: {status, headers (lower-case
#                             names), body}
#   start_trickle_proxy($port)
#                             a loopback TCP proxy to $port that passes the
#                             server's bytes on 3 at a time, 1 ms apart, so
#                             replies reach the client split across many
#                             reads; returns the proxy's port
#   start_fake_redis($reply)  a loopback server that answers whatever it is
#                             sent with the raw bytes $reply and keeps the
#                             connection open; returns its port
#   redis_command_at($port, @args)
#                             as redis_command, to the Redis on 127.0.0.1:$port
#                             ($port may be "HOST:PORT", HOST an IPv4 address)
#   start_redis_cluster($masters, [$replicas])
#                             a Redis Cluster of $masters masters (each with
#                             $replicas replicas, default 0) on free ports,
#                             created with `redis-cli --cluster create`;
#                             waits until every node says cluster_state:ok.
#                             Sets TEST_NGINX_CLUSTER_PORT_1 .. _N (masters
#                             first) and returns the ports.
#   cluster_owner($key)       the port of the master serving $key's slot, and
#                             the slot
#   cluster_node_stop($port), cluster_node_start($port)
#                             stop (TERM) and start again one cluster node
#   start_node($port, @args)  (not exported) a redis-server with @args
#                             (--port $port among them), awaited at its
#                             --bind address (default 127.0.0.1); stop it
#                             with cluster_node_stop($port)
#   start_redis_sentinel()    a master, its replica and one sentinel watching
#                             them as "mymaster" (quorum 1); sets
#                             TEST_NGINX_SENTINEL_PORT, TEST_NGINX_MASTER_PORT
#                             and TEST_NGINX_REPLICA_PORT
#   sentinel_master_port()    the master's port as the sentinel names it now
#   tls_files()               certificates made with openssl on first use,
#                             in a temp dir (paths in a hashref; also sets
#                             TEST_NGINX_TLS_DIR): ca.pem, other-ca.pem;
#                             server (localhost, 127.0.0.1; by ca),
#                             other-server (the same names; by other-ca),
#                             wrong-name (redis.example.net only; by ca),
#                             client (by ca), other-client (by other-ca):
#                             each NAME.pem with NAME.key
#   start_redis_tls(%opts)    a redis-server with a plain port (for the
#                             test's own commands) and a TLS port; opts:
#                             cert (server, other-server or wrong-name;
#                             default server), args (more arguments).
#                             Returns (plain port, TLS port); restart it
#                             with cluster_node_stop/_start(plain port)
#   start_redis_cluster_tls($masters)
#                             as start_redis_cluster, over TLS
#                             (--tls-cluster yes): returns [plain, tls]
#                             port pairs and sets TEST_NGINX_CLUSTER_TLS_PORT_n
#   start_redis_sentinel_tls()
#                             as start_redis_sentinel, the master, replica
#                             and sentinel on TLS too (--tls-replication):
#                             sets TEST_NGINX_SENTINEL_TLS_PORT and returns
#                             ([plain, tls] of sentinel, master, replica)
#   replica_caught_up($master, $replica)
#                             waits (up to 10 s) until the replica has
#                             everything the master wrote; true when it has
#   nginx_post($uri, $key)    POSTs "x" to the nginx under test with the key;
#                             returns the response's status code
#   nginx_port()              the port Test::Nginx serves on
#   master_pid(), worker_pids()
#                             the nginx master under test and its workers
#                             (files with master_on()); not exported
#   h2_post($port, $uri, %opts)
#                             a POST over HTTP/2 with curl, trailers
#                             included (see the sub); not exported
#   test_nginx_defaults()     after `use Test::Nginx::Socket`: blocks keep
#                             their order, load the built module, and get an
#                             `upstream backend` pointing at upstream.pl
#
# Cleanup: an END block (and INT/TERM/HUP handlers) stops the processes this
# module started, by pid, and removes its temp dir. A watchdog process does
# the same if the test process dies without running END (e.g. SIGKILL).

package IdempotencyTest;

use strict;
use warnings;

use Cwd qw(abs_path);
use Errno qw(EINTR);
use File::Basename qw(dirname);
use File::Path qw(make_path remove_tree);
use File::Spec;
use File::Temp qw(tempdir);
use IO::Handle;
use IO::Select;
use IO::Socket::INET;
use POSIX qw(WNOHANG _exit);
use Time::HiRes qw(time sleep);

use Exporter ();
our @ISA    = ('Exporter');
our @EXPORT = qw(
    redis_command upstream_count upstream_log wait_until
    redis_port upstream_port redis_pid stop_redis start_redis
    redis_key stored_kind send_request start_in_flight nginx_port test_nginx_defaults
    start_trickle_proxy start_fake_redis
    redis_command_at start_redis_cluster cluster_owner cluster_node_stop cluster_node_start
    start_redis_sentinel sentinel_master_port nginx_post replica_caught_up
    tls_files start_redis_tls start_redis_cluster_tls start_redis_sentinel_tls
);
our @EXPORT_OK = qw(start read_response);

use constant {
    STARTUP_TIMEOUT => 10,    # seconds for a fixture to answer
    IO_TIMEOUT      => 10,    # seconds for one Redis / HTTP exchange
    STOP_TIMEOUT    => 5,     # seconds between TERM and KILL
};

my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..'));
my $UPSTREAM_SCRIPT = "$REPO/scripts/upstream.pl";

my ($owner_pid, $tmpdir);
my @extra_pids;    # helpers started on demand (start_trickle_proxy)
my ($redis_port, $redis_pid);
my ($upstream_port, $upstream_pid);
my ($watchdog_pid, $watchdog_fh);
my %ports_taken;

sub import {
    my ($class, @args) = @_;
    start() unless $^C;
    $class->export_to_level(1, $class, @args);
}

# ---------------------------------------------------------------- startup

sub start {
    return if $owner_pid && $owner_pid == $$;
    $owner_pid = $$;
    $tmpdir = tempdir('idempotency-test-XXXXXX', TMPDIR => 1);

    $ENV{TEST_NGINX_REPO}   = $REPO;
    $ENV{TEST_NGINX_MODULE} //= "$REPO/build/ngx_http_idempotency_module.so";
    # nginx's own port: a free one, so that two runs of the suite (two
    # checkouts, CI beside a developer) never meet on Test::Nginx's 1984
    $ENV{TEST_NGINX_SERVER_PORT} //= free_port();

    install_signal_handlers();
    start_watchdog();
    start_redis();
    start_upstream();
    return 1;
}

# A free loopback port: bind 127.0.0.1:0, read the port, close.
# Never hands out the same port twice in one process.
sub free_port {
    for (1 .. 50) {
        my $sock = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1,
        ) or die "IdempotencyTest: cannot bind 127.0.0.1:0: $!\n";
        my $port = $sock->sockport;
        close $sock;
        next if $ports_taken{$port}++;
        return $port;
    }
    die "IdempotencyTest: no free port found\n";
}

# fork + exec @cmd with stdout/stderr appended to $log; returns the pid.
sub spawn {
    my ($log, @cmd) = @_;
    my $pid = fork;
    die "IdempotencyTest: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        open STDIN, '<', File::Spec->devnull;
        open STDOUT, '>>', $log or _exit(127);
        open STDERR, '>&', \*STDOUT or _exit(127);
        exec { $cmd[0] } @cmd or do {
            print STDERR "IdempotencyTest: exec $cmd[0]: $!\n";
            _exit(127);
        };
    }
    tell_watchdog("pid $pid");
    return $pid;
}

# True while $pid (our child) runs; reaps it once it has exited.
sub alive {
    my ($pid) = @_;
    return 0 unless $pid;
    return waitpid($pid, WNOHANG) == 0;
}

# Sends $signal, waits up to STOP_TIMEOUT, then KILLs; always reaps.
sub stop_pid {
    my ($pid, $signal) = @_;
    return unless $pid;
    tell_watchdog("forget $pid");
    if (alive($pid)) {
        kill $signal // 'TERM', $pid;
        my $deadline = time + STOP_TIMEOUT;
        sleep 0.02 while alive($pid) && time < $deadline;
        if (alive($pid)) {
            kill 'KILL', $pid;
            waitpid($pid, 0);
        }
    }
}

sub log_tail {
    my ($file) = @_;
    open my $fh, '<', $file or return '';
    my @lines = <$fh>;
    return join '', @lines > 10 ? @lines[-10 .. -1] : @lines;
}

sub find_redis_server {
    my $bin = $ENV{TEST_REDIS_SERVER} // 'redis-server';
    return $bin if $bin =~ m{/} ? -x $bin : grep { -x "$_/$bin" } File::Spec->path;
    die "IdempotencyTest: redis-server not found (set TEST_REDIS_SERVER or PATH)\n";
}

# Starts Redis: on a fresh free port the first time, on the same port after.
sub start_redis {
    die "IdempotencyTest: start() has not run\n" unless $owner_pid;
    die "IdempotencyTest: redis already running (pid $redis_pid)\n" if alive($redis_pid);
    my $bin = find_redis_server();
    my $dir = "$tmpdir/redis";
    make_path($dir);
    my $fixed_port = defined $redis_port;
    my $log = "$tmpdir/redis.log";

    for my $attempt (1 .. 3) {
        $redis_port = free_port() unless $fixed_port;
        $ENV{TEST_NGINX_REDIS_PORT} = $redis_port;
        $redis_pid = spawn($log, $bin,
            '--bind', '127.0.0.1', '--port', $redis_port,
            '--save', '', '--appendonly', 'no', '--dir', $dir,
            '--daemonize', 'no');
        my $up = wait_until(sub {
            return 'dead' unless alive($redis_pid);
            my $pong = eval { redis_command('PING') };
            return defined $pong && $pong eq 'PONG' ? 'up' : 0;
        }, STARTUP_TIMEOUT) || 'timeout';
        return $redis_pid if $up eq 'up';
        stop_pid($redis_pid);
        $redis_pid = undef;
        # A port lost to a race is retried with a new one (or, when pinned,
        # the same one shortly after); a timeout is not retried.
        last if $up eq 'timeout';
        sleep 0.2;
    }
    die "IdempotencyTest: redis-server did not start on 127.0.0.1:$redis_port\n"
        . log_tail($log);
}

sub stop_redis {
    my ($signal) = @_;
    stop_pid($redis_pid, $signal);
    $redis_pid = undef;
    return 1;
}

sub start_upstream {
    my $log = "$tmpdir/upstream.log";
    my $state = "$tmpdir/upstream-state";
    make_path($state);
    for my $attempt (1 .. 3) {
        $upstream_port = free_port();
        $ENV{TEST_NGINX_UPSTREAM_PORT} = $upstream_port;
        $upstream_pid = spawn($log, $^X, $UPSTREAM_SCRIPT,
            '--listen', "127.0.0.1:$upstream_port", '--state-dir', $state);
        my $up = wait_until(sub {
            return 'dead' unless alive($upstream_pid);
            my ($status, $body) = eval { http_get('/_health') };
            return defined $status && $status == 200 && $body eq 'ok' ? 'up' : 0;
        }, STARTUP_TIMEOUT) || 'timeout';
        return $upstream_pid if $up eq 'up';
        stop_pid($upstream_pid);
        $upstream_pid = undef;
        last if $up eq 'timeout';
    }
    die "IdempotencyTest: upstream.pl did not start on 127.0.0.1:$upstream_port\n"
        . log_tail($log);
}

# ---------------------------------------------------------------- clusters

my %node_pid;     # port => pid of the cluster and sentinel servers started here
my %node_args;    # port => the arguments it was started with

sub find_redis_cli {
    (my $cli = find_redis_server()) =~ s/redis-server$/redis-cli/;
    return $cli if $cli =~ m{/} && -x $cli;
    return 'redis-cli';
}

sub start_node {
    my ($port, @args) = @_;
    my $dir = "$tmpdir/node-$port";
    make_path($dir);
    $node_args{$port} = [@args];
    my ($bind) = map { $args[$_ + 1] } grep { $args[$_] eq '--bind' } 0 .. $#args - 1;
    my $at = ($bind // '127.0.0.1') . ":$port";
    my $pid = spawn("$dir/log", find_redis_server(), @args, '--dir', $dir, '--daemonize', 'no');
    $node_pid{$port} = $pid;
    push @extra_pids, $pid;
    wait_until(sub {
        return 'dead' unless alive($pid);
        my $pong = eval { redis_command_at($at, 'PING') };
        return defined $pong && $pong eq 'PONG';
    }, STARTUP_TIMEOUT) eq '1'
        or die "IdempotencyTest: redis-server did not start on $at\n" . log_tail("$dir/log");
    return $pid;
}

sub cluster_node_stop {
    my ($port) = @_;
    stop_pid(delete $node_pid{$port});
}

sub cluster_node_start {
    my ($port) = @_;
    return start_node($port, @{ $node_args{$port} });
}

sub start_redis_cluster {
    my ($masters, $replicas) = @_;
    $replicas //= 0;
    my @ports = map { free_port() } 1 .. $masters * (1 + $replicas);
    for my $port (@ports) {
        start_node($port, '--bind', '127.0.0.1', '--port', $port, '--save', '', '--appendonly', 'no',
                   '--cluster-enabled', 'yes', '--cluster-port', free_port(), '--cluster-config-file', "$tmpdir/node-$port/nodes.conf",
                   '--cluster-node-timeout', '1000', '--cluster-require-full-coverage', 'no');
    }
    my $out = `@{[find_redis_cli()]} --cluster create @{[map { "127.0.0.1:$_" } @ports]} --cluster-replicas $replicas --cluster-yes 2>&1`;
    die "IdempotencyTest: redis-cli --cluster create failed:\n$out" if $?;
    wait_until(sub {
        for my $port (@ports) {
            my $info = eval { redis_command_at($port, 'CLUSTER', 'INFO') } // '';
            return 0 unless $info =~ /cluster_state:ok/ && $info =~ /cluster_slots_assigned:16384/;
        }
        return 1;
    }, 30) or die "IdempotencyTest: the cluster did not become ready\n";
    # masters first, in the order redis-cli chose them
    my @master_ports = grep { (redis_command_at($_, 'ROLE'))->[0] eq 'master' } @ports;
    my @replica_ports = grep { my $p = $_; !grep { $_ == $p } @master_ports } @ports;
    my @ordered = (@master_ports, @replica_ports);
    $ENV{"TEST_NGINX_CLUSTER_PORT_$_"} = $ordered[$_ - 1] for 1 .. @ordered;
    return @ordered;
}

sub cluster_owner {
    my ($key) = @_;
    my $any = $ENV{TEST_NGINX_CLUSTER_PORT_1} or die "cluster_owner: no cluster\n";
    my $slot = redis_command_at($any, 'CLUSTER', 'KEYSLOT', $key);
    for my $range (@{ redis_command_at($any, 'CLUSTER', 'SLOTS') }) {
        return ($range->[2][1], $slot) if $slot >= $range->[0] && $slot <= $range->[1];
    }
    die "cluster_owner: slot $slot is not served\n";
}

sub start_redis_sentinel {
    my ($master, $replica, $sentinel) = (free_port(), free_port(), free_port());
    my @common = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no');
    start_node($master, @common, '--port', $master);
    start_node($replica, @common, '--port', $replica, '--replicaof', '127.0.0.1', $master);
    wait_until(sub { (eval { redis_command_at($replica, 'INFO', 'replication') } // '') =~ /master_link_status:up/ }, 30)
        or die "IdempotencyTest: the replica did not connect to its master\n";
    my $conf = "$tmpdir/sentinel-$sentinel.conf";
    open my $fh, '>', $conf or die "IdempotencyTest: $conf: $!\n";
    print {$fh} "bind 127.0.0.1\nport $sentinel\nsentinel monitor mymaster 127.0.0.1 $master 1\n"
        . "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n";
    close $fh;
    start_node($sentinel, $conf, '--sentinel');
    # The sentinel knows the replica (from the master's INFO) before any test fails over.
    wait_until(sub {
        my $replicas = eval { redis_command_at($sentinel, 'SENTINEL', 'REPLICAS', 'mymaster') } || [];
        return scalar @$replicas;
    }, 30) or die "IdempotencyTest: the sentinel did not find the replica\n";
    @ENV{qw(TEST_NGINX_SENTINEL_PORT TEST_NGINX_MASTER_PORT TEST_NGINX_REPLICA_PORT)} = ($sentinel, $master, $replica);
    return ($sentinel, $master, $replica);
}

# ---------------------------------------------------------------- TLS

my $tls;    # the certificates, once made

sub openssl {
    my (@args) = @_;
    my $out = `openssl @args 2>&1`;
    die "IdempotencyTest: openssl @args failed:\n$out" if $?;
}

# A key and a certificate NAME.pem signed by $ca (undef: self-signed CA).
sub make_cert {
    my ($dir, $name, $subject, $ca, $san) = @_;
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', "$dir/$name.key");
    if (!defined $ca) {
        openssl('req', '-x509', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.pem", '-days', 2,
                '-subj', "'/CN=$subject'", '-addext', "'basicConstraints=critical,CA:TRUE'",
                '-addext', "'keyUsage=critical,keyCertSign,cRLSign'");
        return;
    }
    open my $fh, '>', "$dir/$name.ext" or die "IdempotencyTest: $dir/$name.ext: $!\n";
    print {$fh} "basicConstraints=CA:FALSE\n" . ($san ? "subjectAltName=$san\n" : '');
    close $fh;
    openssl('req', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.csr", '-subj', "'/CN=$subject'");
    openssl('x509', '-req', '-in', "$dir/$name.csr", '-CA', "$dir/$ca.pem", '-CAkey', "$dir/$ca.key",
            '-CAcreateserial', '-out', "$dir/$name.pem", '-days', 2, '-extfile', "$dir/$name.ext");
}

sub tls_files {
    return $tls if $tls;
    die "IdempotencyTest: start() has not run\n" unless $owner_pid;
    my $dir = "$tmpdir/tls";
    make_path($dir);
    make_cert($dir, 'ca', 'Idempotency Test CA');
    make_cert($dir, 'other-ca', 'Another CA');
    make_cert($dir, 'server', 'localhost', 'ca', 'DNS:localhost,IP:127.0.0.1');
    make_cert($dir, 'other-server', 'localhost', 'other-ca', 'DNS:localhost,IP:127.0.0.1');
    make_cert($dir, 'wrong-name', 'redis.example.net', 'ca', 'DNS:redis.example.net');
    make_cert($dir, 'client', 'gateway', 'ca');
    make_cert($dir, 'other-client', 'gateway', 'other-ca');
    $ENV{TEST_NGINX_TLS_DIR} = $dir;
    $tls = { dir => $dir, map { ($_ => "$dir/$_.pem", "$_-key" => "$dir/$_.key") }
             qw(ca other-ca server other-server wrong-name client other-client) };
    return $tls;
}

# redis-server's TLS arguments for certificate $cert (clients unchecked
# unless the caller passes --tls-auth-clients yes after them).
sub redis_tls_args {
    my ($tls_port, $cert) = @_;
    my $t = tls_files();
    return ('--tls-port', $tls_port, '--tls-cert-file', $t->{$cert // 'server'},
            '--tls-key-file', $t->{($cert // 'server') . '-key'}, '--tls-ca-cert-file', $t->{ca},
            '--tls-auth-clients', 'no');
}

sub start_redis_tls {
    my (%o) = @_;
    my ($plain, $tls_port) = (free_port(), free_port());
    start_node($plain, '--bind', '127.0.0.1', '--port', $plain, '--save', '', '--appendonly', 'no',
               redis_tls_args($tls_port, $o{cert}), @{ $o{args} || [] });
    return ($plain, $tls_port);
}

sub start_redis_cluster_tls {
    my ($masters) = @_;
    my $t = tls_files();
    my @pairs = map { [free_port(), free_port()] } 1 .. $masters;
    for my $p (@pairs) {
        my ($plain, $tls_port) = @$p;
        start_node($plain, '--bind', '127.0.0.1', '--port', $plain, '--save', '', '--appendonly', 'no',
                   redis_tls_args($tls_port), '--tls-cluster', 'yes', '--tls-replication', 'yes',
                   '--cluster-enabled', 'yes', '--cluster-port', free_port(),
                   '--cluster-config-file', "$tmpdir/node-$plain/nodes.conf",
                   '--cluster-node-timeout', '1000', '--cluster-require-full-coverage', 'no');
    }
    my $out = `@{[find_redis_cli()]} --tls --cacert $t->{ca} --cluster create @{[map { "127.0.0.1:$_->[1]" } @pairs]} --cluster-replicas 0 --cluster-yes 2>&1`;
    die "IdempotencyTest: redis-cli --cluster create (TLS) failed:\n$out" if $?;
    wait_until(sub {
        for my $p (@pairs) {
            my $info = eval { redis_command_at($p->[0], 'CLUSTER', 'INFO') } // '';
            return 0 unless $info =~ /cluster_state:ok/ && $info =~ /cluster_slots_assigned:16384/
                && $info =~ /cluster_known_nodes:$masters\b/;
        }
        return 1;
    }, 30) or die "IdempotencyTest: the TLS cluster did not become ready\n";
    $ENV{"TEST_NGINX_CLUSTER_TLS_PORT_$_"} = $pairs[$_ - 1][1] for 1 .. @pairs;
    return @pairs;
}

sub start_redis_sentinel_tls {
    my ($master, $replica, $sentinel) = map { [free_port(), free_port()] } 1 .. 3;
    my @common = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--tls-replication', 'yes');
    start_node($master->[0], @common, '--port', $master->[0], redis_tls_args($master->[1]));
    start_node($replica->[0], @common, '--port', $replica->[0], redis_tls_args($replica->[1]),
               '--replicaof', '127.0.0.1', $master->[1]);
    wait_until(sub { (eval { redis_command_at($replica->[0], 'INFO', 'replication') } // '') =~ /master_link_status:up/ }, 30)
        or die "IdempotencyTest: the TLS replica did not connect to its master\n";
    my $t = tls_files();
    my $conf = "$tmpdir/sentinel-$sentinel->[0].conf";
    open my $fh, '>', $conf or die "IdempotencyTest: $conf: $!\n";
    print {$fh} "bind 127.0.0.1\nport $sentinel->[0]\ntls-port $sentinel->[1]\ntls-replication yes\n"
        . "tls-cert-file $t->{server}\ntls-key-file $t->{'server-key'}\ntls-ca-cert-file $t->{ca}\n"
        . "tls-auth-clients no\n"
        . "sentinel monitor mymaster 127.0.0.1 $master->[1] 1\n"
        . "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n";
    close $fh;
    start_node($sentinel->[0], $conf, '--sentinel');
    wait_until(sub {
        my $replicas = eval { redis_command_at($sentinel->[0], 'SENTINEL', 'REPLICAS', 'mymaster') } || [];
        return scalar @$replicas;
    }, 30) or die "IdempotencyTest: the TLS sentinel did not find the replica\n";
    $ENV{TEST_NGINX_SENTINEL_TLS_PORT} = $sentinel->[1];
    return ($sentinel, $master, $replica);
}

sub replica_caught_up {
    my ($master, $replica) = @_;
    return wait_until(sub {
        my ($mo) = (eval { redis_command_at($master, 'INFO', 'replication') } // '') =~ /master_repl_offset:(\d+)/;
        my ($ro) = (eval { redis_command_at($replica, 'INFO', 'replication') } // '') =~ /slave_repl_offset:(\d+)/;
        defined $mo && defined $ro && $mo == $ro;
    }, 10);
}

sub sentinel_master_port {
    my $reply = eval { redis_command_at($ENV{TEST_NGINX_SENTINEL_PORT}, 'SENTINEL', 'get-master-addr-by-name', 'mymaster') };
    return ref $reply eq 'ARRAY' ? $reply->[1] : undef;
}

# ---------------------------------------------------------------- accessors

sub redis_port    { $redis_port }
sub upstream_port { $upstream_port }
sub redis_pid     { alive($redis_pid) ? $redis_pid : undef }

sub upstream_log {
    open my $fh, '<', "$tmpdir/upstream.log" or return '';
    local $/;
    return scalar <$fh>;
}

# ---------------------------------------------------------------- polling

sub wait_until {
    my ($code, $timeout) = @_;
    $timeout //= 10;
    my $deadline = time + $timeout;
    my $delay = 0.01;
    while (1) {
        my $result = $code->();
        return $result if $result;
        my $left = $deadline - time;
        return 0 if $left <= 0;
        sleep($delay < $left ? $delay : $left);
        $delay *= 2 if $delay < 0.25;
    }
}

# ---------------------------------------------------------------- I/O

# Reads from $sock into $$buf until $done->() is true; dies on EOF/timeout.
sub read_until {
    my ($sock, $buf, $done, $what) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = time + IO_TIMEOUT;
    until ($done->()) {
        my $left = $deadline - time;
        die "$what: timeout\n" if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        next if !defined $n && $! == EINTR;
        die "$what: connection closed\n" unless $n;
    }
}

sub redis_command { redis_command_at($redis_port, @_) }

sub redis_command_at {
    my ($where, @args) = @_;
    die "redis_command: no command\n" unless @args;
    my ($host, $port) = $where =~ /^(.+):(\d+)$/ ? ($1, $2) : ('127.0.0.1', $where);
    my $sock = IO::Socket::INET->new(
        PeerAddr => $host, PeerPort => $port, Proto => 'tcp',
        Timeout => IO_TIMEOUT,
    ) or die "redis_command: cannot connect to $host:$port: $!\n";
    my $req = '*' . @args . "\r\n";
    $req .= '$' . length($_) . "\r\n$_\r\n" for map { defined $_ ? "$_" : '' } @args;
    $sock->autoflush(1);
    print {$sock} $req or die "redis_command: write: $!\n";

    my $buf = '';
    my $reply = parse_resp($sock, \$buf);
    close $sock;
    die "redis error: $reply->{message}\n" if ref $reply eq 'IdempotencyTest::RedisError';
    return $reply;
}

sub parse_resp {
    my ($sock, $buf, $depth) = @_;
    die "redis_command: reply nested too deep\n" if ($depth //= 0) > 32;
    read_until($sock, $buf, sub { index($$buf, "\r\n") >= 0 }, 'redis_command');
    my $line = substr($$buf, 0, index($$buf, "\r\n") + 2, '');
    my ($type, $rest) = (substr($line, 0, 1), substr($line, 1, -2));
    return $rest if $type eq '+';
    return $rest + 0 if $type eq ':';
    return IdempotencyTest::RedisError->new($rest) if $type eq '-';
    if ($type eq '$') {
        return undef if $rest < 0;
        read_until($sock, $buf, sub { length $$buf >= $rest + 2 }, 'redis_command');
        my $data = substr($$buf, 0, $rest + 2, '');
        return substr($data, 0, $rest);
    }
    if ($type eq '*') {
        return undef if $rest < 0;
        return [ map { parse_resp($sock, $buf, $depth + 1) } 1 .. $rest ];
    }
    die "redis_command: unexpected reply type '$type'\n";
}

# GET $path from the upstream; returns (status, body).
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

# ---------------------------------------------------------------- watchdog

# A forked process that holds the read end of a pipe only we write to. If we
# die without cleaning up, it sees EOF and stops the pids we told it about.
sub start_watchdog {
    pipe(my $reader, my $writer) or die "IdempotencyTest: pipe: $!\n";
    my $pid = fork;
    die "IdempotencyTest: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        close $writer;
        $0 = 'IdempotencyTest watchdog';
        $SIG{$_} = 'IGNORE' for qw(INT HUP);
        $SIG{TERM} = 'DEFAULT';
        my %pids;
        while (defined(my $line = <$reader>)) {
            if    ($line =~ /^pid (\d+)/)    { $pids{$1} = 1 }
            elsif ($line =~ /^forget (\d+)/) { delete $pids{$1} }
            elsif ($line =~ /^quit/)         { _exit(0) }
        }
        # EOF without "quit": our creator is gone.
        # They are not our children, so we cannot reap them; a zombie (until
        # init reaps it) counts as gone.
        my $running = sub {
            my ($pid) = @_;
            return 0 unless kill 0, $pid;
            open my $fh, '<', "/proc/$pid/stat" or return 1;
            return (<$fh> // '') !~ /\) Z /;
        };
        my @pids = keys %pids;
        kill 'TERM', @pids if @pids;
        my $deadline = time + STOP_TIMEOUT;
        while (time < $deadline && grep { $running->($_) } @pids) { sleep 0.05 }
        @pids = grep { $running->($_) } @pids;
        kill 'KILL', @pids if @pids;
        remove_tree($tmpdir) if defined $tmpdir;
        _exit(0);
    }
    close $reader;
    $writer->autoflush(1);
    ($watchdog_pid, $watchdog_fh) = ($pid, $writer);
}

sub tell_watchdog {
    my ($msg) = @_;
    return unless $watchdog_fh && $owner_pid && $$ == $owner_pid;
    local $SIG{PIPE} = 'IGNORE';
    print {$watchdog_fh} "$msg\n";
}

# ---------------------------------------------------------------- cleanup

my $cleaned = 0;

sub cleanup {
    return if $cleaned || !$owner_pid || $$ != $owner_pid;
    $cleaned = 1;
    local ($?, $!, $@);
    # Retire the watchdog first so it never signals pids we have reaped.
    if ($watchdog_pid) {
        tell_watchdog('quit');
        close $watchdog_fh;
        my $deadline = time + STOP_TIMEOUT;
        sleep 0.01 while alive($watchdog_pid) && time < $deadline;
        if (alive($watchdog_pid)) { kill 'KILL', $watchdog_pid; waitpid($watchdog_pid, 0) }
        $watchdog_pid = $watchdog_fh = undef;
    }
    stop_pid($_) for @extra_pids;
    stop_pid($upstream_pid);
    stop_pid($redis_pid);
    $upstream_pid = $redis_pid = undef;
    remove_tree($tmpdir) if defined $tmpdir && -d $tmpdir;
}

sub install_signal_handlers {
    my %signo = (INT => 2, HUP => 1, TERM => 15);
    for my $sig (keys %signo) {
        my $previous = $SIG{$sig};
        $SIG{$sig} = sub {
            if (!$owner_pid || $$ != $owner_pid) {   # a forked copy of us
                $SIG{$sig} = 'DEFAULT';
                kill $sig, $$;
                return;
            }
            cleanup();
            $previous->(@_) if ref $previous eq 'CODE';
            exit(128 + $signo{$sig});                # runs other END blocks
        };
    }
}

END { cleanup() }

# ---------------------------------------------------------------- errors

# ---------------------------------------------------------------- nginx side

sub redis_key {
    my ($key, $scope, $prefix, $server) = @_;
    $scope  = '' unless defined $scope;
    $prefix = 'idem:' unless defined $prefix;
    $server = 'localhost' unless defined $server;
    require Digest::SHA;
    my $spaced = length($server) . ':' . $server . $scope;
    return $prefix . Digest::SHA::sha256_hex(length($spaced) . ':' . $spaced . $key);
}

# Waits (default 5 s) until nginx's error log has a line with $text; true
# when it has. The log is Test::Nginx's, looked up when called.
sub error_log_has {
    my ($text, $secs) = @_;
    return wait_until(sub {
        open my $fh, '<', $Test::Nginx::Util::ErrLogFile or return 0;
        local $/;
        return index(<$fh> // '', $text) >= 0;
    }, $secs // 5);
}

sub stored_kind {
    my ($rkey) = @_;
    my $value = redis_command('GET', $rkey);
    return undef unless defined $value;
    return 'foreign' unless length($value) >= 5 && substr($value, 0, 4) eq "IDM\x01";
    my $kind = ord(substr($value, 4, 1));
    return { 1 => 'claim', 2 => 'response', 3 => 'unreplayable' }->{$kind} || 'foreign';
}

sub nginx_port {
    return $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT} || 1984;
}

# The pid of the nginx master under test (files with master_on()).
sub master_pid {
    open my $fh, '<', $Test::Nginx::Util::PidFile or die "IdempotencyTest: no nginx pid file\n";
    my ($pid) = <$fh> =~ /(\d+)/;
    return $pid;
}

# The master's live children, its workers (configurations without cache
# processes; under valgrind a worker's command line is not nginx's, so it
# is not looked at).
sub worker_pids {
    my $master = master_pid();
    my @pids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        open my $fh, '<', $stat or next;
        my $line = <$fh> // next;
        my ($pid, $state, $ppid) = $line =~ /^(\d+) \(.*\) (\S) (\d+)/s or next;
        push @pids, $pid if $ppid == $master && $state ne 'Z';
    }
    return sort { $a <=> $b } @pids;
}

# One POST over HTTP/2 (prior knowledge, h2c) with curl to 127.0.0.1:$port.
# Options: key (Idempotency-Key), body (default "x"), max_time (seconds,
# default 10: curl gives up and closes after it), headers (more "Name:
# value" strings), curl (more curl arguments). Returns {status, headers
# (lower-case names), trailers (the "name: value" lines after the body,
# joined by "\n"), body, exit (curl's exit code)}.
sub h2_post {
    my ($port, $uri, %o) = @_;
    my $dir = tempdir(CLEANUP => 1);
    my @cmd = ('curl', '-s', '-v', '--http2-prior-knowledge', '-X', 'POST', '--data-binary', $o{body} // 'x',
               (defined $o{key} ? ('-H', "Idempotency-Key: $o{key}") : ()),
               (map { ('-H', $_) } @{ $o{headers} || [] }), @{ $o{curl} || [] },
               '-o', "$dir/body", '--max-time', $o{max_time} // 10, "http://127.0.0.1:$port$uri");
    my $pid = fork // die "IdempotencyTest: fork: $!\n";
    if ($pid == 0) {
        open STDERR, '>', "$dir/trace" or _exit(127);
        exec @cmd or _exit(127);
    }
    waitpid $pid, 0;
    my $exit = $? >> 8;
    my ($trace, $body) = ('', '');
    if (open my $fh, '<', "$dir/trace") { local $/; $trace = <$fh> // '' }
    if (open my $fh, '<', "$dir/body") { local $/; $body = <$fh> // '' }
    # "< " lines: the status, the headers, an empty one, then the trailers
    my ($status, %headers, @trailers, $in_trailers);
    for my $line (map { /^< (.*?)\r?$/ ? ($1) : () } split /\n/, $trace) {
        if (!defined $status) { ($status) = $line =~ m{^HTTP/2 (\d{3})}; next }
        if ($line eq '') { $in_trailers = 1; next }
        if ($in_trailers) { push @trailers, $line; next }
        $headers{lc $1} = $2 if $line =~ /^([^:]+):\s*(.*)$/;
    }
    return { status => $status // 0, headers => \%headers, trailers => join("\n", @trailers), body => $body,
             exit => $exit };
}

sub send_request {
    my ($raw) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => nginx_port(), Proto => 'tcp', Timeout => IO_TIMEOUT,
    ) or die "cannot connect to nginx on port " . nginx_port() . ": $!";
    $sock->autoflush(1);
    print {$sock} $raw or die "cannot send the request: $!";
    return $sock;
}

sub nginx_post {
    my ($uri, $key) = @_;
    my $sock = send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                            . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx");
    my $buf = '';
    read_until($sock, \$buf, sub { $buf =~ /\A[^\r]*\r\n/ }, 'nginx_post');
    close $sock;
    return $buf =~ m{\AHTTP/1\.[01] (\d{3})} ? $1 : 0;
}

# Reads a response to the end of the connection (send it with
# "Connection: close"): {status, headers (lower-case names), body}; status 0
# when nothing that looks like a response came within IO_TIMEOUT.
sub read_response {
    my ($sock) = @_;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), time + IO_TIMEOUT);
    while (time < $deadline) {
        next unless $sel->can_read($deadline - time);
        my $n = sysread($sock, $buf, 65536, length $buf);
        next if !defined $n && $! == EINTR;
        last unless $n;
    }
    close $sock;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    return { status => 0, headers => {}, body => '' } unless defined $head && $head =~ m{\AHTTP/1\.\d (\d{3})};
    my $status = $1;
    my %headers = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head;
    return { status => $status, headers => \%headers, body => $body // '' };
}

sub start_in_flight {
    my ($uri, $key) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = upstream_count($path);
    my $sock = send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: $key\r\n"
                            . "Content-Length: 1\r\n\r\nx");
    wait_until(sub { upstream_count($path) > $before }, IO_TIMEOUT)
        or die "the original POST $uri never reached the upstream\n";
    return $sock;
}

sub start_trickle_proxy {
    my ($target) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp', ReuseAddr => 1,
    ) or die "IdempotencyTest: cannot listen for the trickle proxy: $!\n";
    my $port = $listen->sockport;
    my $pid = fork;
    die "IdempotencyTest: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        trickle_loop($listen, $target);
        _exit(0);
    }
    close $listen;
    push @extra_pids, $pid;
    tell_watchdog("pid $pid");
    return $port;
}

# Relays every accepted connection to 127.0.0.1:$target; client bytes pass
# as they come, server bytes 3 at a time. Ends when its parent stops it.
sub trickle_loop {
    my ($listen, $target) = @_;
    my $select = IO::Select->new($listen);
    my %peer;
    my $deadline = time + 3600;
    while (time < $deadline) {
        for my $fh ($select->can_read(1)) {
            if ($fh == $listen) {
                my $client = $listen->accept or next;
                my $server = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target, Proto => 'tcp')
                    or do { close $client; next };
                @peer{$client, $server} = ($server, $client);
                $select->add($client, $server);
                next;
            }
            my $other = $peer{$fh} or next;
            my $n = sysread($fh, my $buf, 65536);
            if (!$n) {
                $select->remove($fh, $other);
                delete @peer{$fh, $other};
                close $fh;
                close $other;
                next;
            }
            my $from_server = $fh->peerport == $target;
            my $step = $from_server ? 3 : length $buf;
            for (my $off = 0; $off < length $buf; $off += $step) {
                syswrite($other, substr($buf, $off, $step)) // last;
                sleep 0.001 if $from_server;
            }
        }
    }
}

sub start_fake_redis {
    my ($reply) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp', ReuseAddr => 1,
    ) or die "IdempotencyTest: cannot listen for the fake Redis: $!\n";
    my $port = $listen->sockport;
    my $pid = fork;
    die "IdempotencyTest: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        my $select = IO::Select->new($listen);
        my $deadline = time + 3600;
        while (time < $deadline) {
            for my $fh ($select->can_read(1)) {
                if ($fh == $listen) {
                    my $c = $listen->accept or next;
                    $select->add($c);
                    next;
                }
                my $n = sysread($fh, my $buf, 65536);
                if (!$n) { $select->remove($fh); close $fh; next }
                syswrite($fh, $reply);
            }
        }
        _exit(0);
    }
    close $listen;
    push @extra_pids, $pid;
    tell_watchdog("pid $pid");
    return $port;
}

sub test_nginx_defaults {
    no strict 'refs';
    &{"Test::Nginx::Socket::no_shuffle"}();
    &{"Test::Nginx::Socket::repeat_each"}(1);
    &{"Test::Nginx::Socket::no_root_location"}();
    &{"Test::Nginx::Socket::add_block_preprocessor"}(sub {
        my $block = shift;
        my $main = $block->main_config // '';
        $block->set_value('main_config', "load_module \$TEST_NGINX_MODULE;\n$main");
        my $http = $block->http_config // '';
        $block->set_value('http_config',
            "upstream backend { server 127.0.0.1:\$TEST_NGINX_UPSTREAM_PORT; }\n$http");
    });
}

package IdempotencyTest::RedisError;

use overload '""' => sub { "redis error: $_[0]{message}" }, fallback => 1;

sub new     { my ($class, $message) = @_; bless { message => $message }, $class }
sub message { $_[0]{message} }

use Idem::Store ();    # the store the blocks run on (TEST_NGINX_IDEM_STORE)

1;
