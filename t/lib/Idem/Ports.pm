# Idem/Ports.pm — free loopback ports for the servers a test starts.
# Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Ports;
#     my $port = Idem::Ports::free_port();
#
# API (nothing is exported):
#   free_port()       a port free on 127.0.0.1 now (bind port 0, read it,
#                     close); never the same one twice in one process
#   port_is_free($port)
#                     true when 127.0.0.1:$port can be bound now

package Idem::Ports;

use strict;
use warnings;

use IO::Socket::INET;

my %taken;

sub free_port {
    for (1 .. 50) {
        my $sock = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1,
        ) or die "Idem::Ports: cannot bind 127.0.0.1:0: $!\n";
        my $port = $sock->sockport;
        close $sock;
        next if $taken{$port}++;
        return $port;
    }
    die "Idem::Ports: no free port found\n";
}

sub port_is_free {
    my ($port) = @_;
    my $sock = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => $port, Proto => 'tcp', Listen => 1, ReuseAddr => 1,
    ) or return 0;
    close $sock;
    return 1;
}

1;
