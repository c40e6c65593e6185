# Idem/Store.pm — the store a t/*.t file's blocks run on, chosen for the
# whole run by TEST_NGINX_IDEM_STORE: "redis" (the default) or "zone" (the
# shared-memory store). The blocks are written for Redis; on the zone store
# a block preprocessor rewrites them:
#
#   - each line `idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;` (in
#     --- http_config or --- config, at any depth) becomes
#     `idempotency_store zone=store;`, and --- http_config gains
#     `idempotency_zone zone=store:10m;` (one zone for the block);
#   - a block marked `--- redis_only` (it reads or writes Redis itself, or
#     configures Redis in another way) is skipped; so must be a block that
#     continues it (no --- config of its own: it runs on the nginx of the
#     block before it);
#   - an unmarked block that still names Redis after the rewrite (another
#     idempotency_redis* directive, the test Redis's port, or a helper that
#     reads Redis) stops the run with a message saying which block to mark,
#     rather than passing or failing for the wrong reason;
#   - the block's name ends with " [zone store]".
#
# Which files run on both stores is listed once, in the Makefile
# (STORE_AGNOSTIC_TESTS): `make prove` runs them again with
# TEST_NGINX_IDEM_STORE=zone after the whole suite on Redis.
#
# Usage: loaded by IdempotencyTest.pm for every file; the preprocessor is
# added when the file's main program has been compiled (INIT), that is
# after `use Test::Nginx::Socket`, so a file needs nothing of its own. Then
# too, Test::Nginx is given the free port the fixtures chose, whatever the
# order the file loaded them in (see align_port).
# A file's Perl code may ask which store the run is on:
#
#     Idem::Store::store()      "redis" or "zone"
#     Idem::Store::on_zone()    true on the zone store
#     Idem::Store::stored($key, $kind, [$secs])
#                               waits (default 10 s) until the record of
#                               $key is of $kind ('response', 'unreplayable'),
#                               once its original's client has the last byte
#                               or the end of the connection; true when it is

package Idem::Store;

use strict;
use warnings;

use constant {
    ZONE      => 'store',    # the zone's name in rewritten blocks
    ZONE_SIZE => '10m',      # room for the largest response a block stores (300 kB) many times
};

# A line of the test Redis's configuration, as the blocks write it.
my $REDIS_LINE = qr/^([ \t]*)idempotency_redis[ \t]+127\.0\.0\.1:\$TEST_NGINX_REDIS_PORT[ \t]*;[ \t]*$/m;

# What a block may not name on the zone store unless it is marked
# --- redis_only: Redis directives and the test Redis's helpers.
my $NAMES_REDIS = qr/\b(idempotency_redis\w*|TEST_NGINX_REDIS_PORT|redis_command\w*|redis_key|stored_kind
                        |stop_redis|start_redis|redis_port|redis_pid)\b/x;

my $STORE = $ENV{TEST_NGINX_IDEM_STORE} // '';
$STORE = 'redis' if $STORE eq '';
die "Idem::Store: TEST_NGINX_IDEM_STORE must be \"redis\" or \"zone\", not \"$STORE\"\n"
    unless $STORE eq 'redis' || $STORE eq 'zone';

sub store   { $STORE }
sub on_zone { $STORE eq 'zone' }

# On Redis a record is written as the response's last byte goes out (or as
# the request ends), so it is awaited. A zone is written by the worker
# itself before it passes the last byte on, or ends the request: once the
# original's client has that byte, or has seen the connection close, the
# record is there.
sub stored {
    my ($key, $kind, $secs) = @_;
    return 1 if on_zone();
    return IdempotencyTest::wait_until(sub {
        (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq $kind
    }, $secs // 10);
}

my $installed;
my $previous_skipped;

# Adds the preprocessor once Test::Nginx::Socket is there (files that are
# not Test::Nginx files load this module too and are left alone).
sub install {
    return if $installed || !on_zone();
    my $add = Test::Nginx::Socket->can('add_block_preprocessor') or return;
    $installed = 1;
    $add->(\&to_zone);
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

# The preprocessor: one block of a Redis file, made to run on the zone.
sub to_zone {
    my ($block) = @_;
    my $name = $block->name;
    my $skip = defined $block->redis_only;
    if (!defined $block->config && $previous_skipped && !$skip) {
        die "Idem::Store: $name continues a --- redis_only block (it has no --- config of its own): "
            . "mark it --- redis_only too\n";
    }
    $previous_skipped = $skip;
    if ($skip) {
        $block->set_value('SKIP', 1);
        return;
    }

    my $rewritten = 0;
    for my $section (qw(http_config config)) {
        my $text = $block->$section;
        next unless defined $text;
        $rewritten += $text =~ s/$REDIS_LINE/$1idempotency_store zone=${\ZONE};/g;
        $block->set_value($section, $text);
    }
    if ($rewritten) {
        $block->set_value('http_config',
                          'idempotency_zone zone=' . ZONE . ':' . ZONE_SIZE . ";\n" . ($block->http_config // ''));
    }

    # Every section as the file wrote it, and the configuration as rewritten.
    my %seen = (%{ $block->original_values }, http_config => $block->http_config, config => $block->config);
    for my $section (sort keys %seen) {
        next unless defined $seen{$section} && $seen{$section} =~ $NAMES_REDIS;
        die "Idem::Store: $name names Redis (\"$1\" in --- $section) and is not marked --- redis_only: "
            . "on the zone store it would not test what it says; mark it --- redis_only\n";
    }

    $block->set_value('name', "$name [zone store]");
}

1;
