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
#                       up and the sentinel would promote the replica
#                       (await_sentinel). Sets TEST_NGINX_SENTINEL_PORT,
#                       TEST_NGINX_MASTER_PORT and TEST_NGINX_REPLICA_PORT;
#                       returns (sentinel, master, replica)
#   start_redis_sentinel_tls()
#                       the same with every node on TLS too
#                       (--tls-replication): sets TEST_NGINX_SENTINEL_TLS_PORT
#                       and returns ([plain, tls] of sentinel, master,
#                       replica)
#                       All three are Idem::Redis nodes
#                       (Idem::Redis::node_stop/node_start).
#   sentinel_master_port([$name], [$sentinel])
#                       the master's port as the sentinel names it now
#   replica_caught_up($master, $replica)
#                       waits (up to 10 s) until the replica has everything
#                       the master wrote; true when it has
#   await_sentinel($sentinel, $name, $what)
#                       waits (up to 30 s) until the sentinel would promote
#                       a replica of $name: one it lists with flags exactly
#                       "slave" (linked to it, not down) and
#                       master-link-status "ok" (it has read the replica's
#                       INFO, which says its link to the master is up); dies
#                       naming what it last saw
#   sentinel_failover($sentinel, [$name])
#                       SENTINEL FAILOVER $name (default "mymaster"), asked
#                       again (up to 30 s) while the sentinel answers that it
#                       cannot start one yet (NOGOODSLAVE: no replica it
#                       would promote right now; INPROG: a failover is still
#                       running); returns "OK" once it starts one, dies with
#                       the sentinel's last answer if it never does. The
#                       promotion itself is the caller's to await
#                       (sentinel_master_port)
#   switch_master(sentinel => $s, old => $port, new => $port, [name => $n],
#                 [within => $secs])
#                       sentinel_failover, then waits (up to `within` s,
#                       default 30) until the sentinel names port `new`
#                       master and the old master (its plain port `old`)
#                       reports the role slave; dies with sentinel_view
#                       otherwise; returns sentinel_failover's "OK"
#   sentinel_view($sentinel, [$name])
#                       one line saying what the sentinel sees now: the
#                       master's address, flags and failover-state, each
#                       replica's flags and master-link-status (for die
#                       messages: a failover the sentinel accepted can still
#                       be aborted, e.g. when no replica qualifies as it
#                       selects one)

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

# The replicas of $name as the sentinel lists them, each a hashref of its
# fields; () when it cannot say.
sub sentinel_replicas {
    my ($sentinel, $name) = @_;
    my $replicas = eval { redis_command_at($sentinel, 'SENTINEL', 'REPLICAS', $name) };
    return ref $replicas eq 'ARRAY' ? map { +{ @$_ } } grep { ref $_ eq 'ARRAY' } @$replicas : ();
}

sub await_sentinel {
    my ($sentinel, $name, $what) = @_;
    # A replica the sentinel would promote (Redis's sentinelSelectSlave): its
    # link to the sentinel up and answering, not subjectively or
    # objectively down, and its INFO read recently and saying its master
    # link is up. Before that, SENTINEL FAILOVER answers NOGOODSLAVE: the
    # sentinel lists a replica it learnt of from the master's INFO ("slave,
    # disconnected", master-link-status "err") before it has reached it.
    my $seen = 'no replica';
    Idem::Wait::wait_until(sub {
        my @replicas = sentinel_replicas($sentinel, $name);
        $seen = join('; ', map { "$_->{name}: flags $_->{flags}, master-link-status $_->{'master-link-status'}" }
                              @replicas) || 'no replica';
        return grep { $_->{flags} eq 'slave' && $_->{'master-link-status'} eq 'ok' } @replicas;
    }, 30) or die "Idem::RedisSentinel: the $what did not see a replica it would promote within 30 s "
                . "(flags \"slave\", master-link-status \"ok\"); it saw: $seen\n";
}

sub sentinel_failover {
    my ($sentinel, $name) = @_;
    $name //= 'mymaster';
    my ($last, $tries) = ('no answer', 0);
    Idem::Wait::wait_until(sub {
        $tries++;
        my $reply = eval { redis_command_at($sentinel, 'SENTINEL', 'FAILOVER', $name) };
        return 1 if defined $reply && $reply eq 'OK';
        $last = defined $reply ? "answered $reply" : $@ =~ s/\n\z//r;
        # Not yet: no replica it would promote right now, or the last
        # failover has not finished. Anything else will not change by asking again.
        return 0 if $last =~ /\b(?:NOGOODSLAVE|INPROG)\b/;
        die "Idem::RedisSentinel: SENTINEL FAILOVER $name on $sentinel: $last\n";
    }, 30) or die "Idem::RedisSentinel: SENTINEL FAILOVER $name on $sentinel did not start a failover "
                . "within 30 s ($tries tries); last: $last\n";
    return 'OK';
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

sub switch_master {
    my (%o) = @_;
    my ($sentinel, $name, $old, $new) = @o{qw(sentinel name old new)};
    $name //= 'mymaster';
    my $within = $o{within} // 30;
    my $answer = sentinel_failover($sentinel, $name);
    Idem::Wait::wait_until(sub { (sentinel_master_port($name, $sentinel) // 0) == $new }, $within)
        or die "Idem::RedisSentinel: the sentinel $sentinel did not name $new master of $name within $within s "
             . "of the failover (" . sentinel_view($sentinel, $name) . ")\n";
    # its clients are killed as it is demoted: a ROLE that meets that is asked again
    Idem::Wait::wait_until(sub { (eval { redis_command_at($old, 'ROLE')->[0] } // '') eq 'slave' }, $within)
        or die "Idem::RedisSentinel: the old master $old did not report the role slave within $within s "
             . "of the promotion (" . sentinel_view($sentinel, $name) . ")\n";
    return $answer;
}

sub sentinel_view {
    my ($sentinel, $name) = @_;
    $name //= 'mymaster';
    my $master = eval { redis_command_at($sentinel, 'SENTINEL', 'MASTER', $name) };
    return "sentinel $sentinel: SENTINEL MASTER $name: " . ($@ =~ s/\n\z//r) unless ref $master eq 'ARRAY';
    my %m = @$master;
    return join '; ', "sentinel $sentinel: master $m{ip}:$m{port} flags $m{flags} failover-state "
                      . ($m{'failover-state'} // 'none'),
                  map { "replica $_->{name} flags $_->{flags} master-link-status $_->{'master-link-status'}" }
                      sentinel_replicas($sentinel, $name);
}

sub sentinel_master_port {
    my ($name, $sentinel) = @_;
    my $reply = eval { redis_command_at($sentinel // $ENV{TEST_NGINX_SENTINEL_PORT}, 'SENTINEL',
                                        'get-master-addr-by-name', $name // 'mymaster') };
    return ref $reply eq 'ARRAY' ? $reply->[1] : undef;
}

1;
