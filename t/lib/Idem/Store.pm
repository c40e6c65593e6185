# Idem/Store.pm — the store a t/*.t file's blocks run on, chosen for the
# whole run by TEST_NGINX_IDEM_STORE: "redis" (the default), "zone" (the
# shared-memory store) or "cluster" (a Redis Cluster of 3 masters, started
# for the file). The blocks are written for the single test Redis; on the
# other stores a block preprocessor rewrites them:
#
#   - each line `idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;` (in
#     --- http_config or --- config, at any depth) becomes
#     `idempotency_store zone=store;`, and --- http_config gains
#     `idempotency_zone zone=store:10m;` (one zone for the block); on the
#     cluster it becomes `idempotency_redis_cluster` with the three
#     masters as seed nodes;
#   - a block marked `--- redis_only` (it reads or writes the test Redis
#     itself, or configures Redis in another way, or needs a single node)
#     is skipped on both; a block marked `--- shared_store` (it runs
#     other gateways on the run's store, see http_store_conf) is skipped
#     on the zone only, which no other gateway shares; so must be a block
#     that continues a skipped one (no --- config of its own: it runs on
#     the nginx of the block before it);
#   - an unmarked block that still names Redis after the rewrite (another
#     idempotency_redis* directive, the test Redis's port, or a helper that
#     reads Redis) stops the run with a message saying which block to mark,
#     rather than passing or failing for the wrong reason;
#   - the block's name ends with " [zone store]" or " [cluster store]".
#
# Which files run on which store is listed once, in the Makefile
# (STORE_AGNOSTIC_TESTS, CLUSTER_TESTS): `make prove` runs them again with
# TEST_NGINX_IDEM_STORE=zone, then =cluster, after the whole suite on Redis.
#
# Usage: loaded by IdempotencyTest.pm for every file; the preprocessor is
# added when the file's main program has been compiled (INIT), that is
# after `use Test::Nginx::Socket`, so a file needs nothing of its own (the
# cluster is started then too, once for the file). Then too, Test::Nginx
# is given the free port the fixtures chose, whatever the order the file
# loaded them in (see align_port).
# A file's Perl code may ask which store the run is on, and use it:
#
#     Idem::Store::store()      "redis", "zone" or "cluster"
#     Idem::Store::on_zone()    true on the zone store
#     Idem::Store::on_cluster() true on the cluster
#     Idem::Store::shared()     true when gateways share the store (Redis,
#                               the cluster): another nginx on
#                               http_store_conf() sees the same records
#     Idem::Store::http_store_conf()
#                               the http-level directive line(s) of the
#                               run's store, for an nginx started outside
#                               Test::Nginx: the test Redis, the cluster's
#                               seed nodes, or a zone of its own (with
#                               idempotency_store at the http level)
#     Idem::Store::cluster_ports()
#                               the cluster's master ports (started on the
#                               first call; the cluster pass only)
#     Idem::Store::stored($key, $kind, [$secs])
#                               waits (default 10 s) until the record of
#                               $key is of $kind ('response', 'unreplayable'),
#                               once its original's client has the last byte
#                               or the end of the connection; true when it is
#                               (on the cluster, asked of the master serving
#                               the key's slot)

package Idem::Store;

use strict;
use warnings;

use constant {
    ZONE      => 'store',    # the zone's name in rewritten blocks
    ZONE_SIZE => '64m',      # room for the largest response a block stores (20 MB, in pieces)
    MASTERS   => 3,          # the cluster's masters (no replicas: no block fails a node over)
};

# A line of the test Redis's configuration, as the blocks write it.
my $REDIS_LINE = qr/^([ \t]*)idempotency_redis[ \t]+127\.0\.0\.1:\$TEST_NGINX_REDIS_PORT[ \t]*;[ \t]*$/m;

# What a block may not name on the zone store unless it is marked
# --- redis_only: Redis directives and the test Redis's helpers.
my $NAMES_REDIS = qr/\b(idempotency_redis\w*|TEST_NGINX_REDIS_PORT|redis_command\w*|redis_key|stored_kind
                        |stop_redis|start_redis|redis_port|redis_pid)\b/x;

my $STORE = $ENV{TEST_NGINX_IDEM_STORE} // '';
$STORE = 'redis' if $STORE eq '';
die "Idem::Store: TEST_NGINX_IDEM_STORE must be \"redis\", \"zone\" or \"cluster\", not \"$STORE\"\n"
    unless $STORE eq 'redis' || $STORE eq 'zone' || $STORE eq 'cluster';

sub store      { $STORE }
sub on_zone    { $STORE eq 'zone' }
sub on_cluster { $STORE eq 'cluster' }
sub shared     { !on_zone() }

my @cluster;

# The cluster's masters, started (by the fixtures, stopped with them) on
# the first call.
sub cluster_ports {
    die "Idem::Store: no cluster on the $STORE store\n" unless on_cluster();
    @cluster = (IdempotencyTest::start_redis_cluster(MASTERS))[0 .. MASTERS - 1] unless @cluster;
    return @cluster;
}

# The line a block's `idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;`
# becomes on the cluster.
sub cluster_directive {
    return 'idempotency_redis_cluster ' . join(' ', map { "127.0.0.1:$_" } cluster_ports()) . ';';
}

sub http_store_conf {
    return "idempotency_zone zone=${\ZONE}:${\ZONE_SIZE};\nidempotency_store zone=${\ZONE};\n" if on_zone();
    return cluster_directive() . "\n" if on_cluster();
    return 'idempotency_redis 127.0.0.1:' . IdempotencyTest::redis_port() . ";\n";
}

# On Redis a record is written as the response's last byte goes out (or as
# the request ends), so it is awaited. A zone is written by the worker
# itself before it passes the last byte on, or ends the request: once the
# original's client has that byte, or has seen the connection close, the
# record is there.
sub stored {
    my ($key, $kind, $secs) = @_;
    return 1 if on_zone();
    my $rkey = IdempotencyTest::redis_key($key);
    my ($at) = on_cluster() ? IdempotencyTest::cluster_owner($rkey) : ();
    return IdempotencyTest::wait_until(sub {
        (IdempotencyTest::stored_kind($rkey, $at) // '') eq $kind
    }, $secs // 10);
}

my $installed;
my $previous_skipped;

# Adds the preprocessor once Test::Nginx::Socket is there (files that are
# not Test::Nginx files load this module too and are left alone). The
# cluster is started then, before any block's --- init asks for it.
sub install {
    return if $installed || !(on_zone() || on_cluster());
    my $add = Test::Nginx::Socket->can('add_block_preprocessor') or return;
    $installed = 1;
    cluster_ports() if on_cluster();
    $add->(\&rewrite);
}

# Test::Nginx reads its port from TEST_NGINX_SERVER_PORT when it is loaded,
# falling back to a fixed 1984; the fixtures choose a free port when they
# start. A file that loaded Test::Nginx first would have nginx listen on
# 1984 and meet any other run there: Test::Nginx is told the chosen port.
sub align_port {
    my $port = $ENV{TEST_NGINX_SERVER_PORT} or return;
    my $set = Test::Nginx::Socket->can('server_port') or return;
    my $set_client = Test::Nginx::Socket->can('server_port_for_client');
    $set->($port);
    $set_client->($port) if $set_client && !$ENV{TEST_NGINX_CLIENT_PORT};
}

INIT { align_port(); install() }

# The preprocessor: one block of a Redis file, made to run on the zone or
# the cluster.
sub rewrite {
    my ($block) = @_;
    my $name = $block->name;
    my $skip = defined $block->redis_only || (on_zone() && defined $block->shared_store);
    if (!defined $block->config && $previous_skipped && !$skip) {
        die "Idem::Store: $name continues a skipped block (it has no --- config of its own): "
            . "mark it as that block is (--- redis_only or --- shared_store)\n";
    }
    $previous_skipped = $skip;
    if ($skip) {
        $block->set_value('SKIP', 1);
        return;
    }

    my $rewritten = 0;
    my %left;    # the configuration without the lines rewritten
    my $line = on_zone() ? 'idempotency_store zone=' . ZONE . ';' : cluster_directive();
    for my $section (qw(http_config config)) {
        my $text = $block->$section;
        next unless defined $text;
        $left{$section} = $text =~ s/$REDIS_LINE//gr;
        $rewritten += $text =~ s/$REDIS_LINE/$1$line/g;
        $block->set_value($section, $text);
    }
    if ($rewritten && on_zone()) {
        $block->set_value('http_config',
                          'idempotency_zone zone=' . ZONE . ':' . ZONE_SIZE . ";\n" . ($block->http_config // ''));
    }

    # Every section as the file wrote it, and the configuration but for the
    # lines rewritten.
    my %seen = (%{ $block->original_values }, %left);
    for my $section (sort keys %seen) {
        next unless defined $seen{$section} && $seen{$section} =~ $NAMES_REDIS;
        die "Idem::Store: $name names Redis (\"$1\" in --- $section) and is not marked --- redis_only: "
            . "on the $STORE store it would not test what it says; mark it --- redis_only\n";
    }

    $block->set_value('name', "$name [$STORE store]");
}

1;
