# Idem/Wait.pm — waiting on a condition, never on the clock alone: every
# wait polls what it waits for, with a small backoff, and is bounded in
# time. Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Wait;
#     Idem::Wait::wait_until(sub { -e $file }, 5) or die "no $file\n";
#
# API (nothing is exported):
#   wait_until($code, [$secs])
#                     calls $code until it returns true (at most $secs,
#                     default 10; 10 ms apart, doubling up to 0.32 s);
#                     returns its first true value, or 0 on timeout
#   wait_for($what, $code, [$secs])
#                     as wait_until; dies "$what: not within N s" on timeout
#   read_until($sock, \$buf, $done, $what, [$secs])
#                     reads from $sock into $buf until $done->() is true;
#                     dies on EOF or after $secs (default 10)

package Idem::Wait;

use strict;
use warnings;

use Errno qw(EINTR);
use IO::Select;
use Time::HiRes qw(time sleep);

use constant IO_TIMEOUT => 10;

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

sub wait_for {
    my ($what, $code, $timeout) = @_;
    $timeout //= 10;
    return wait_until($code, $timeout) || die "$what: not within $timeout s\n";
}

sub read_until {
    my ($sock, $buf, $done, $what, $timeout) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = time + ($timeout // IO_TIMEOUT);
    until ($done->()) {
        my $left = $deadline - time;
        die "$what: timeout\n" if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        next if !defined $n && $! == EINTR;
        die "$what: connection closed\n" unless $n;
    }
}

1;
