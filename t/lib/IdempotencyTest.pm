# IdempotencyTest.pm — per-test-file fixtures for the t/*.t suite:
# a private redis-server and a private scripts/upstream.pl, both on free
# loopback ports, plus small helpers to talk to them.
#
# The facade of the fixture library in t/lib/Idem/ (each module documents
# its API at its top, and works without Test::Nginx):
#   Idem::Proc          temp dir, spawn, stop by pid, watchdog, cleanup
#   Idem::Ports         free loopback ports
#   Idem::Wait          wait_until, read_until
#   Idem::Redis         the test Redis, more nodes, the RESP client
#   Idem::RedisCluster  Redis Cluster (plain, TLS), settling checks
#   Idem::RedisSentinel master + replica + sentinel (plain, TLS)
#   Idem::TLS           certificates, a Redis with a TLS port
#   Idem::Upstream      scripts/upstream.pl and its counts
#   Idem::FaultProxy    fault proxy, trickle proxy, fake Redis
#   Idem::HTTP          an HTTP/1.1 load client (the stress suite)
#   Idem::Nginx         nginx outside Test::Nginx (the stress suite)
#   Idem::Blocks        nginx locations written once for many blocks (--- config eval)
#   Idem::Store         the suite once per store: the zone pass's block preprocessor
#   Idem::CrashSentinel a crash, an alert or a sanitizer report fails the
#                       block (installed by test_nginx_defaults) or gateway
#   Idem::TlsListener   a TLS server that records what it receives
# This file keeps what is about the nginx under Test::Nginx, and every name
# the t/*.t files use (exported, or as IdempotencyTest::name).
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
#   stored_kind($redis_key, [$at])
#                             what the module keeps there (on the test Redis,
#                             or the node at port $at): undef, 'claim',
#                             'response', 'unreplayable' or 'foreign'
#   stored_plain_size($redis_key)
#                             (not exported) the record's size, or the size a
#                             compressed one opens into
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
#   post_key($uri, $key, @headers)
#                             (not exported) POSTs "x" to $uri with the key
#                             and any more header lines; the read response
#   admin_inspect($key)       (not exported) GET /_admin (an idempotency_admin
#                             location) with the key: its JSON, decoded
#                             ({body => ...} when it is not JSON)
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
#   switch_master(sentinel => .., old => .., new => .., [name], [within])
#                             SENTINEL FAILOVER (asked again while the
#                             sentinel answers NOGOODSLAVE or INPROG), then
#                             the promotion of port `new` and the demotion
#                             of `old` awaited; "OK", else dies saying what
#                             the sentinel saw
#   sentinel_view($sentinel, [$name])
#                             one line of what the sentinel sees (master,
#                             failover-state, replicas), for die messages
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
#                             `upstream backend` pointing at upstream.pl; and
#                             the crash sentinel watches every block
#                             (Idem::CrashSentinel)
#
# Cleanup: an END block (and INT/TERM/HUP handlers) stops the processes this
# module started, by pid, and removes its temp dir. A watchdog process does
# the same if the test process dies without running END (e.g. SIGKILL).

package IdempotencyTest;

use strict;
use warnings;

use Errno qw(EINTR);
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::INET;
use POSIX qw(_exit);
use Time::HiRes qw(time sleep);

use Idem::CrashSentinel;
use Idem::FaultProxy;
use Idem::Ports;
use Idem::Proc;
use Idem::Redis;
use Idem::RedisCluster;
use Idem::RedisSentinel;
use Idem::TLS;
use Idem::Upstream;
use Idem::Wait;

use Exporter ();
our @ISA    = ('Exporter');
our @EXPORT = qw(
    redis_command upstream_count upstream_log wait_until
    redis_port upstream_port redis_pid stop_redis start_redis
    redis_key stored_kind send_request start_in_flight nginx_port test_nginx_defaults
    start_trickle_proxy start_fake_redis
    redis_command_at start_redis_cluster cluster_owner cluster_node_stop cluster_node_start
    start_redis_sentinel sentinel_master_port nginx_post replica_caught_up sentinel_view
    switch_master
    tls_files start_redis_tls start_redis_cluster_tls start_redis_sentinel_tls
);
our @EXPORT_OK = qw(start read_response);

use constant {
    STARTUP_TIMEOUT => 10,    # seconds for a fixture to answer
    IO_TIMEOUT      => 10,    # seconds for one Redis / HTTP exchange
    STOP_TIMEOUT    => 5,     # seconds between TERM and KILL
};

# The names the suite has always called, from the modules that own them now.
BEGIN {
    my %from = (
        'Idem::Proc'          => [qw(spawn stop_pid log_tail cleanup tell_watchdog)],
        'Idem::Ports'         => [qw(free_port)],
        'Idem::Wait'          => [qw(wait_until read_until)],
        'Idem::Redis'         => [qw(redis_command redis_command_at parse_resp redis_port redis_pid stop_redis
                                     start_node find_redis_server find_redis_cli)],
        'Idem::RedisCluster'  => [qw(start_redis_cluster start_redis_cluster_tls cluster_owner)],
        'Idem::RedisSentinel' => [qw(start_redis_sentinel start_redis_sentinel_tls sentinel_master_port
                                     replica_caught_up sentinel_view switch_master)],
        'Idem::TLS'           => [qw(tls_files start_redis_tls redis_tls_args make_cert openssl)],
        'Idem::Upstream'      => [qw(start_upstream upstream_port upstream_count upstream_log http_get)],
        'Idem::FaultProxy'    => [qw(start_trickle_proxy trickle_loop start_fake_redis)],
    );
    no strict 'refs';
    for my $module (keys %from) {
        *{"IdempotencyTest::$_"} = \&{"${module}::$_"} for @{ $from{$module} };
    }
    *alive              = \&Idem::Proc::running;
    *cluster_node_stop  = \&Idem::Redis::node_stop;
    *cluster_node_start = \&Idem::Redis::node_start;
}

my $owner_pid;

sub import {
    my ($class, @args) = @_;
    start() unless $^C;
    $class->export_to_level(1, $class, @args);
}

sub start {
    return if $owner_pid && $owner_pid == $$;
    $owner_pid = $$;
    my $repo = Idem::Upstream::repo();
    $ENV{TEST_NGINX_REPO}   = $repo;
    $ENV{TEST_NGINX_MODULE} //= "$repo/build/ngx_http_idempotency_module.so";
    Idem::Proc::init();
    # nginx's own port: a free one, so that two runs of the suite (two
    # checkouts, CI beside a developer) never meet on Test::Nginx's 1984
    $ENV{TEST_NGINX_SERVER_PORT} //= Idem::Ports::free_port();
    start_redis();
    Idem::Upstream::start_upstream();
    return 1;
}

sub start_redis { Idem::Redis::start_redis(@_) }

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
    my ($rkey, $at) = @_;
    my $value = defined $at ? redis_command_at($at, 'GET', $rkey) : redis_command('GET', $rkey);
    return undef unless defined $value;
    # versions 1 and 2 (plain), 3 (compressed), 4 (in pieces), 5 (a marker that says why): module/record.hpp
    return 'foreign' unless length($value) >= 5 && $value =~ /\AIDM[\x01-\x05]/;
    my $kind = ord(substr($value, 4, 1));
    return { 1 => 'claim', 2 => 'response', 3 => 'unreplayable' }->{$kind} || 'foreign';
}


# The size of the plain record stored under $rkey: its length, or for a
# compressed record (version 3, module/compression.hpp) the size it opens
# into, as its head states; undef when there is none.
sub stored_plain_size {
    my ($rkey) = @_;
    my $head = redis_command('GETRANGE', $rkey, 0, 44);
    return undef unless defined $head && length $head;
    return redis_command('STRLEN', $rkey) unless $head =~ /\AIDM\x03/ && length $head == 45;
    return 37 + unpack('N', substr($head, 41, 4));
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


sub post_key {
    my ($uri, $key, @headers) = @_;
    return read_response(send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\n" . join('', map { "$_\r\n" } @headers) . "Content-Length: 1\r\n\r\nx"));
}


sub admin_inspect {
    my ($key) = @_;
    require JSON::PP;
    my $res = read_response(send_request(
        "GET /_admin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n\r\n"));
    return eval { JSON::PP::decode_json($res->{body}) } // { body => $res->{body} };
}


sub start_in_flight {
    my ($uri, $key) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = upstream_count($path);
    # Connection: close, so that reading its response ends with it
    my $sock = send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: $key\r\n"
                            . "Connection: close\r\nContent-Length: 1\r\n\r\nx");
    wait_until(sub { upstream_count($path) > $before }, IO_TIMEOUT)
        or die "the original POST $uri never reached the upstream\n";
    return $sock;
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
    Idem::CrashSentinel::install();
}

use Idem::Store ();    # the store the blocks run on (TEST_NGINX_IDEM_STORE)

1;
