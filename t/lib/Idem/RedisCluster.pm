# Idem/RedisCluster.pm — a Redis Cluster on free loopback ports (plain or
# TLS), and what a test asks it: who serves a key, has it settled after a
# failover or a reshard. Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::RedisCluster;
#     my @ports = Idem::RedisCluster::start_redis_cluster(3, 1);
#
# API (nothing is exported):
#   start_redis_cluster($masters, [$replicas], %o)
#                         $masters masters with $replicas replicas each
#                         (default 0), created with `redis-cli --cluster
#                         create`; waits until every node says
#                         cluster_state:ok. o{args}: more redis-server
#                         arguments; o{settle}: then waits (that many
#                         seconds) until cluster_unsettled says ''. Sets
#                         TEST_NGINX_CLUSTER_PORT_1 .. _N (masters first)
#                         and returns the ports in that order.
#   start_redis_cluster_tls($masters)
#                         the same over TLS (--tls-cluster yes): returns
#                         [plain, tls] port pairs, sets
#                         TEST_NGINX_CLUSTER_TLS_PORT_n
#   cluster_owner($key)   the port of the master serving $key's slot, and
#                         the slot (asks TEST_NGINX_CLUSTER_PORT_1)
#   give_slot($slot, $to, @masters)
#                         hands slot $slot to the master on port $to on
#                         every master of @masters: $to first, with a config
#                         epoch above every other node's (BUMPEPOCH), so a
#                         heartbeat of the old owner still in flight cannot
#                         take the slot back; returns $to's node id
#   cluster_nodes($port)  CLUSTER NODES as { port => { id, master (bool),
#                         master_id, failed, flags, epoch, slots (count),
#                         ranges, open (slots migrating or importing) } }
#   cluster_unsettled(\@ports, %roles)
#                         '' once every node answers cluster_state:ok, all
#                         give the same CLUSTER NODES (no node failing, in
#                         handshake or without address, no slot moving) and
#                         CLUSTER INFO counts, and each node's INFO
#                         replication agrees; else why not. %roles: port =>
#                         'master' or port => its master's port, required
#   cluster_await(\@ports, $secs, %roles)
#                         waits until cluster_unsettled says ''; returns
#                         '' then, else why not
#   cluster_errors(\@ports, $kind)
#                         the count of error replies of $kind (MOVED, ASK)
#                         the nodes have sent
#   Nodes are Idem::Redis nodes: Idem::Redis::node_stop/node_start($port).

package Idem::RedisCluster;

use strict;
use warnings;

use Idem::Ports;
use Idem::Proc;
use Idem::Redis;
use Idem::TLS;
use Idem::Wait;

*redis_command_at = \&Idem::Redis::redis_command_at;

sub node_args {
    my ($port) = @_;
    return ('--cluster-enabled', 'yes', '--cluster-port', Idem::Ports::free_port(),
            '--cluster-config-file', Idem::Redis::node_dir($port) . '/nodes.conf',
            '--cluster-node-timeout', '1000', '--cluster-require-full-coverage', 'no');
}

sub start_redis_cluster {
    my ($masters, $replicas, %o) = @_;
    $replicas //= 0;
    my @ports = map { Idem::Ports::free_port() } 1 .. $masters * (1 + $replicas);
    for my $port (@ports) {
        Idem::Redis::start_node($port, '--bind', '127.0.0.1', '--port', $port, '--save', '', '--appendonly', 'no',
                                node_args($port), @{ $o{args} || [] });
    }
    my $cli = Idem::Redis::find_redis_cli();
    my $out = `$cli --cluster create @{[map { "127.0.0.1:$_" } @ports]} --cluster-replicas $replicas --cluster-yes 2>&1`;
    die "Idem::RedisCluster: redis-cli --cluster create failed:\n$out" if $?;
    Idem::Wait::wait_until(sub {
        for my $port (@ports) {
            my $info = eval { redis_command_at($port, 'CLUSTER', 'INFO') } // '';
            return 0 unless $info =~ /cluster_state:ok/ && $info =~ /cluster_slots_assigned:16384/;
        }
        return 1;
    }, 30) or die "Idem::RedisCluster: the cluster did not become ready\n";
    if ($o{settle}) {
        my $why = cluster_await(\@ports, $o{settle});
        die "Idem::RedisCluster: the new cluster did not settle within $o{settle} s: $why\n" if $why ne '';
    }
    # masters first, in the order redis-cli chose them
    my @master_ports = grep { (redis_command_at($_, 'ROLE'))->[0] eq 'master' } @ports;
    my @replica_ports = grep { my $p = $_; !grep { $_ == $p } @master_ports } @ports;
    my @ordered = (@master_ports, @replica_ports);
    $ENV{"TEST_NGINX_CLUSTER_PORT_$_"} = $ordered[$_ - 1] for 1 .. @ordered;
    return @ordered;
}

sub start_redis_cluster_tls {
    my ($masters) = @_;
    my $t = Idem::TLS::tls_files();
    my @pairs = map { [Idem::Ports::free_port(), Idem::Ports::free_port()] } 1 .. $masters;
    for my $p (@pairs) {
        my ($plain, $tls_port) = @$p;
        Idem::Redis::start_node($plain, '--bind', '127.0.0.1', '--port', $plain, '--save', '', '--appendonly', 'no',
                                Idem::TLS::redis_tls_args($tls_port), '--tls-cluster', 'yes',
                                '--tls-replication', 'yes', node_args($plain));
    }
    my $cli = Idem::Redis::find_redis_cli();
    my $out = `$cli --tls --cacert $t->{ca} --cluster create @{[map { "127.0.0.1:$_->[1]" } @pairs]} --cluster-replicas 0 --cluster-yes 2>&1`;
    die "Idem::RedisCluster: redis-cli --cluster create (TLS) failed:\n$out" if $?;
    Idem::Wait::wait_until(sub {
        for my $p (@pairs) {
            my $info = eval { redis_command_at($p->[0], 'CLUSTER', 'INFO') } // '';
            return 0 unless $info =~ /cluster_state:ok/ && $info =~ /cluster_slots_assigned:16384/
                && $info =~ /cluster_known_nodes:$masters\b/;
        }
        return 1;
    }, 30) or die "Idem::RedisCluster: the TLS cluster did not become ready\n";
    $ENV{"TEST_NGINX_CLUSTER_TLS_PORT_$_"} = $pairs[$_ - 1][1] for 1 .. @pairs;
    return @pairs;
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

sub give_slot {
    my ($slot, $to, @masters) = @_;
    my $id = redis_command_at($to, 'CLUSTER', 'MYID');
    redis_command_at($to, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $id);
    redis_command_at($to, 'CLUSTER', 'BUMPEPOCH');
    redis_command_at($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $id) for grep { $_ ne $to } @masters;
    return $id;
}

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

sub cluster_await {
    my ($ports, $secs, %roles) = @_;
    my $why;
    Idem::Wait::wait_until(sub { ($why = cluster_unsettled($ports, %roles)) eq '' }, $secs);
    return $why;
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

1;
