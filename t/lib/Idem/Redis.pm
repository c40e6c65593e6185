# Idem/Redis.pm — a private redis-server on a free loopback port, any
# number of extra nodes, and a RESP client to talk to them. Core Perl only;
# does not need Test::Nginx. Clusters are in Idem::RedisCluster, Sentinel in
# Idem::RedisSentinel, TLS in Idem::TLS.
#
#     use lib 't/lib';
#     use Idem::Redis;
#     Idem::Redis::start_redis();                   # on a free port
#     Idem::Redis::redis_command('SET', 'k', 'v');
#
# API (nothing is exported):
#   start_redis(%o)       starts "the" Redis: a fresh free port the first
#                         time, the same port (and options) after
#                         stop_redis; waits for PING. o{args}: more
#                         redis-server arguments (e.g. --appendonly yes),
#                         kept for restarts. Sets TEST_NGINX_REDIS_PORT.
#                         Returns the pid.
#   stop_redis([$signal]) stops it (default TERM; e.g. 'KILL'), waits
#   redis_port(), redis_pid()   (redis_pid: undef unless it runs)
#   redis_dir()           its --dir (the AOF lives there)
#   redis_command(@args)  one command to it; the reply: scalar (status,
#                         integer, bulk), undef (nil), arrayref (array). An
#                         error reply dies "redis error: ..."; errors nested
#                         in arrays are IdempotencyTest::RedisError objects
#                         (->message)
#   redis_command_at($where, @args)
#                         the same to "PORT" (127.0.0.1) or "HOST:PORT"
#   start_node($port, @args)
#                         a redis-server with @args (--port $port among
#                         them) in its own dir, awaited at its --bind
#                         address (default 127.0.0.1); returns the pid
#   node_stop($port), node_start($port)
#                         stop (TERM) and start again such a node, with the
#                         same arguments
#   node_pid($port), node_dir($port)
#   find_redis_server(), find_redis_cli()
#                         the binaries: TEST_REDIS_SERVER or REDIS_SERVER,
#                         else redis-server from PATH (a valkey-server will
#                         do: scripts/store-server.sh); the cli beside it
#                         (redis-cli, valkey-cli beside valkey-server), or
#                         TEST_REDIS_CLI

package Idem::Redis;

use strict;
use warnings;

use File::Path qw(make_path);
use File::Spec;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

use Idem::Ports;
use Idem::Proc;
use Idem::Wait;

use constant {
    STARTUP_TIMEOUT => 10,
    IO_TIMEOUT      => 10,
};

my ($redis_port, $redis_pid, @redis_args);
my (%node_pid, %node_args);

sub find_redis_server {
    my $bin = $ENV{TEST_REDIS_SERVER} // $ENV{REDIS_SERVER} // 'redis-server';
    return $bin if $bin =~ m{/} && -x $bin;
    if ($bin !~ m{/}) {
        # not abs_path: redis-server is a symlink whose name selects its mode
        for my $dir (File::Spec->path) {
            return File::Spec->rel2abs("$dir/$bin") if -x "$dir/$bin" && !-d _;
        }
    }
    die "Idem::Redis: redis-server not found (set TEST_REDIS_SERVER or PATH)\n";
}

# The cli of the server under test's own build: its Cluster is created
# and resharded by its own tools, not the machine's.
sub find_redis_cli {
    return $ENV{TEST_REDIS_CLI} if $ENV{TEST_REDIS_CLI};
    my $server = find_redis_server();
    (my $cli = $server) =~ s/(redis|valkey)-server$/$1-cli/;
    return $cli if $cli ne $server && -x $cli;
    die "Idem::Redis: no cli beside $server (set TEST_REDIS_CLI)\n" if $server !~ m{/redis-server$};
    return 'redis-cli';
}

# ---------------------------------------------------------------- the Redis

sub start_redis {
    my (%o) = @_;
    die "Idem::Redis: redis already running (pid $redis_pid)\n" if Idem::Proc::running($redis_pid);
    @redis_args = @{ $o{args} } if $o{args};
    my $tmp = Idem::Proc::tmpdir();
    my $bin = find_redis_server();
    my $dir = redis_dir();
    make_path($dir);
    my $fixed_port = defined $redis_port;
    my $log = "$tmp/redis.log";

    for my $attempt (1 .. 3) {
        $redis_port = Idem::Ports::free_port() unless $fixed_port;
        $ENV{TEST_NGINX_REDIS_PORT} = $redis_port;
        $redis_pid = Idem::Proc::spawn($log, $bin,
            '--bind', '127.0.0.1', '--port', $redis_port,
            '--save', '', '--appendonly', 'no', '--dir', $dir,
            '--daemonize', 'no', @redis_args);
        my $up = Idem::Wait::wait_until(sub {
            return 'dead' unless Idem::Proc::running($redis_pid);
            my $pong = eval { redis_command('PING') };
            return defined $pong && $pong eq 'PONG' ? 'up' : 0;
        }, STARTUP_TIMEOUT) || 'timeout';
        return $redis_pid if $up eq 'up';
        Idem::Proc::stop_pid($redis_pid);
        $redis_pid = undef;
        # A port lost to a race is retried with a new one (or, when pinned,
        # the same one once it can be bound); a timeout is not retried.
        last if $up eq 'timeout';
        Idem::Wait::wait_until(sub { Idem::Ports::port_is_free($redis_port) }, 2) if $fixed_port;
    }
    die "Idem::Redis: redis-server did not start on 127.0.0.1:$redis_port\n" . Idem::Proc::log_tail($log);
}

sub stop_redis {
    my ($signal) = @_;
    Idem::Proc::stop_pid($redis_pid, $signal);
    $redis_pid = undef;
    return 1;
}

sub redis_port { $redis_port }
sub redis_pid  { Idem::Proc::running($redis_pid) ? $redis_pid : undef }
sub redis_dir  { Idem::Proc::tmpdir() . '/redis' }

# ---------------------------------------------------------------- more nodes

sub start_node {
    my ($port, @args) = @_;
    my $dir = node_dir($port);
    make_path($dir);
    $node_args{$port} = [@args];
    my ($bind) = map { $args[$_ + 1] } grep { $args[$_] eq '--bind' } 0 .. $#args - 1;
    my $at = ($bind // '127.0.0.1') . ":$port";
    my $pid = Idem::Proc::spawn("$dir/log", find_redis_server(), @args, '--dir', $dir, '--daemonize', 'no');
    $node_pid{$port} = $pid;
    Idem::Wait::wait_until(sub {
        return 'dead' unless Idem::Proc::running($pid);
        my $pong = eval { redis_command_at($at, 'PING') };
        return defined $pong && $pong eq 'PONG';
    }, STARTUP_TIMEOUT) eq '1'
        or die "Idem::Redis: redis-server did not start on $at\n" . Idem::Proc::log_tail("$dir/log");
    return $pid;
}

sub node_stop {
    my ($port) = @_;
    Idem::Proc::stop_pid(delete $node_pid{$port});
}

sub node_start {
    my ($port) = @_;
    return start_node($port, @{ $node_args{$port} });
}

sub node_pid { $node_pid{ $_[0] } }
sub node_dir { Idem::Proc::tmpdir() . "/node-$_[0]" }

# ---------------------------------------------------------------- client

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
    Idem::Wait::read_until($sock, $buf, sub { index($$buf, "\r\n") >= 0 }, 'redis_command');
    my $line = substr($$buf, 0, index($$buf, "\r\n") + 2, '');
    my ($type, $rest) = (substr($line, 0, 1), substr($line, 1, -2));
    return $rest if $type eq '+';
    return $rest + 0 if $type eq ':';
    return IdempotencyTest::RedisError->new($rest) if $type eq '-';
    if ($type eq '$') {
        return undef if $rest < 0;
        Idem::Wait::read_until($sock, $buf, sub { length $$buf >= $rest + 2 }, 'redis_command');
        my $data = substr($$buf, 0, $rest + 2, '');
        return substr($data, 0, $rest);
    }
    if ($type eq '*') {
        return undef if $rest < 0;
        return [ map { parse_resp($sock, $buf, $depth + 1) } 1 .. $rest ];
    }
    die "redis_command: unexpected reply type '$type'\n";
}

# An error reply nested in an array (the class keeps the name the test
# suite has always used for it).
package IdempotencyTest::RedisError;

use overload '""' => sub { "redis error: $_[0]{message}" }, fallback => 1;

sub new     { my ($class, $message) = @_; bless { message => $message }, $class }
sub message { $_[0]{message} }

1;
