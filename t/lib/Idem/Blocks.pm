# Idem/Blocks.pm — what many t/*.t blocks write alike: the nginx
# configuration text of a location (for `--- config eval`), and a POST on
# its own connection with a one-line summary of its answer (for
# `--- init`). Core Perl and IdempotencyTest only (loaded without
# starting anything); nothing is exported unless asked for.
#
#     use Idem::Blocks qw(idem_location location_conf);
#     ...
#     --- config eval
#     main::idem_location('idempotency_store zone=idem', 'idempotency_ttl 3s')
#
# (a `--- ... eval` section is evaluated outside package main: name the
# functions main::NAME there.)
#
# API:
#   location_conf($path, @directives)
#                     "location $path { ... }" with one directive a line;
#                     a directive without a final ";" or "}" gets one
#                     (not a comment)
#   idem_location(@directives)
#                     the usual guarded location: "location /" with
#                     `idempotency on`, @directives, the
#                     X-Idempotency-Status header (always) and
#                     proxy_pass http://backend
#   counted_location(@directives)
#                     idem_location(@directives), and "location /_count/"
#                     passed to the upstream (GET /_count/PATH: how many
#                     times PATH executed)
#   metered_location(@directives)
#                     "location /" with `idempotency on`, @directives and
#                     proxy_pass http://backend (no status header), and
#                     "location = /metrics" (idempotency_metrics)
#   post($uri, $key, [$body])
#                     POSTs $body (default "x") to $uri with
#                     Idempotency-Key $key on its own connection; returns
#                     the response {status, headers (lower-case names), body}
#   summary($res)     "STATUS IDEMPOTENCY-STATUS EXECUTION" of a response
#                     ("-" for a header it lacks), for comparisons

package Idem::Blocks;

use strict;
use warnings;

use Exporter 'import';
use IdempotencyTest ();    # send_request, read_response; starts nothing
our @EXPORT_OK = qw(location_conf idem_location counted_location metered_location post summary);

sub location_conf {
    my ($path, @directives) = @_;
    return "location $path {\n"
         . join('', map { my $d = $_; $d .= ';' unless $d =~ /[;}]\s*\z|\A#/; "    $d\n" } @directives)
         . "}\n";
}

sub idem_location {
    return location_conf('/', 'idempotency on', @_,
                         'add_header X-Idempotency-Status $idempotency_status always',
                         'proxy_pass http://backend');
}

sub counted_location {
    return idem_location(@_) . location_conf('/_count/', 'proxy_pass http://backend');
}

sub metered_location {
    return location_conf('/', 'idempotency on', @_, 'proxy_pass http://backend')
         . location_conf('= /metrics', 'idempotency_metrics');
}

sub post {
    my ($uri, $key, $body) = @_;
    $body //= 'x';
    my $sock = IdempotencyTest::send_request(
        "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
        . 'Content-Length: ' . length($body) . "\r\n\r\n$body");
    return IdempotencyTest::read_response($sock);
}

sub summary {
    my ($res) = @_;
    return join ' ', $res->{status}, $res->{headers}{'x-idempotency-status'} // '-',
                     $res->{headers}{'x-upstream-execution'} // '-';
}

1;
