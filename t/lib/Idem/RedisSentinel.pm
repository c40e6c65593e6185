# Idem/RedisSentinel.pm — a Redis master, its replica and one sentinel
# watching them, plain or over TLS, on free loopback ports. Core Perl only;
# does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::RedisSentinel;
#     my ($sentinel, $master, $replica) = Idem::RedisSentinel::start_redis_sentinel();
#
# API (nothing is exported):
#   start_redis_sentinel(%o)
#                       the three, the sentinel monitoring the master as
#                       o{name} (default "mymaster"; quorum 1,
#                       down-after 1 s), awaited until the replica's link is
#                       up and the sentinel knows the replica. Sets
#                       TEST_NGINX_SENTINEL_PORT, TEST_NGINX_MASTER_PORT and
#                       TEST_NGINX_REPLICA_PORT; returns (sentinel, master,
#                       replica)
#   start_redis_sentinel_tls()
#                       the same with every node on TLS too
#                       (--tls-replication): sets TEST_NGINX_SENTINEL_TLS_PORT
#                       and returns ([plain, tls] of sentinel, master,
#                       replica)
#   sentinel_master_port([$name], [$sentinel])
#                       the master's port as the sentinel names it now
#   replica_caught_up($master, $replica)
#                       waits (up to 10 s) until the replica has everything
#                       the master wrote; true when it has
#   All three are Idem::Redis nodes (Idem::Redis::node_stop/node_start).

package Idem::RedisSentinel;

use strict;
use warnings;

use Idem::Ports;
use Idem::Proc;
use Idem::Redis;
use Idem::TLS;
use Idem::Wait;

*redis_command_at = \&Idem::Redis::redis_command_at;

sub write_conf {
    my ($port, $text) = @_;
    my $conf = Idem::Proc::tmpdir() . "/sentinel-$port.conf";
    open my $fh, '>', $conf or die "Idem::RedisSentinel: $conf: $!\n";
    print {$fh} $text;
    close $fh;
    return $conf;
}

sub await_link {
    my ($replica, $what) = @_;
    Idem::Wait::wait_until(sub {
        (eval { redis_command_at($replica, 'INFO', 'replication') } // '') =~ /master_link_status:up/
    }, 30) or die "Idem::RedisSentinel: the $what did not connect to its master\n";
}

sub await_sentinel {
    my ($sentinel, $name, $what) = @_;
    # The sentinel knows the replica (from the master's INFO) before any test fails over.
    Idem::Wait::wait_until(sub {
        my $replicas = eval { redis_command_at($sentinel, 'SENTINEL', 'REPLICAS', $name) } || [];
        return scalar @$replicas;
    }, 30) or die "Idem::RedisSentinel: the $what did not find the replica\n";
}

sub start_redis_sentinel {
    my (%o) = @_;
    my $name = $o{name} // 'mymaster';
    my ($master, $replica, $sentinel) = map { Idem::Ports::free_port() } 1 .. 3;
    my @common = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no');
    Idem::Redis::start_node($master, @common, '--port', $master);
    Idem::Redis::start_node($replica, @common, '--port', $replica, '--replicaof', '127.0.0.1', $master);
    await_link($replica, 'replica');
    my $conf = write_conf($sentinel, "bind 127.0.0.1\nport $sentinel\nsentinel monitor $name 127.0.0.1 $master 1\n"
        . "sentinel down-after-milliseconds $name 1000\nsentinel failover-timeout $name 10000\n");
    Idem::Redis::start_node($sentinel, $conf, '--sentinel');
    await_sentinel($sentinel, $name, 'sentinel');
    @ENV{qw(TEST_NGINX_SENTINEL_PORT TEST_NGINX_MASTER_PORT TEST_NGINX_REPLICA_PORT)} = ($sentinel, $master, $replica);
    return ($sentinel, $master, $replica);
}

sub start_redis_sentinel_tls {
    my ($master, $replica, $sentinel) = map { [Idem::Ports::free_port(), Idem::Ports::free_port()] } 1 .. 3;
    my @common = ('--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--tls-replication', 'yes');
    Idem::Redis::start_node($master->[0], @common, '--port', $master->[0], Idem::TLS::redis_tls_args($master->[1]));
    Idem::Redis::start_node($replica->[0], @common, '--port', $replica->[0], Idem::TLS::redis_tls_args($replica->[1]),
                            '--replicaof', '127.0.0.1', $master->[1]);
    await_link($replica->[0], 'TLS replica');
    my $t = Idem::TLS::tls_files();
    my $conf = write_conf($sentinel->[0], "bind 127.0.0.1\nport $sentinel->[0]\ntls-port $sentinel->[1]\n"
        . "tls-replication yes\ntls-cert-file $t->{server}\ntls-key-file $t->{'server-key'}\n"
        . "tls-ca-cert-file $t->{ca}\ntls-auth-clients no\n"
        . "sentinel monitor mymaster 127.0.0.1 $master->[1] 1\n"
        . "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n");
    Idem::Redis::start_node($sentinel->[0], $conf, '--sentinel');
    await_sentinel($sentinel->[0], 'mymaster', 'TLS sentinel');
    $ENV{TEST_NGINX_SENTINEL_TLS_PORT} = $sentinel->[1];
    return ($sentinel, $master, $replica);
}

sub replica_caught_up {
    my ($master, $replica) = @_;
    return Idem::Wait::wait_until(sub {
        my ($mo) = (eval { redis_command_at($master, 'INFO', 'replication') } // '') =~ /master_repl_offset:(\d+)/;
        my ($ro) = (eval { redis_command_at($replica, 'INFO', 'replication') } // '') =~ /slave_repl_offset:(\d+)/;
        defined $mo && defined $ro && $mo == $ro;
    }, 10);
}

sub sentinel_master_port {
    my ($name, $sentinel) = @_;
    my $reply = eval { redis_command_at($sentinel // $ENV{TEST_NGINX_SENTINEL_PORT}, 'SENTINEL',
                                        'get-master-addr-by-name', $name // 'mymaster') };
    return ref $reply eq 'ARRAY' ? $reply->[1] : undef;
}

1;
