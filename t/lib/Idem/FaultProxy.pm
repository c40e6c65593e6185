# Idem/FaultProxy.pm — loopback peers that misbehave on purpose: a proxy to
# Redis that drops, stalls or cuts its replies on command, a proxy that
# trickles a server's bytes, and a fake Redis that answers anything with
# fixed bytes. Each runs in a forked process, stopped at cleanup. Core Perl
# only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::FaultProxy;
#     my $px = Idem::FaultProxy::fault_proxy_start($redis_port);
#     Idem::FaultProxy::fault_proxy_mode($px, 'stall', 800);
#
# API (nothing is exported):
#   fault_proxy_start($target_port)
#                        a proxy to 127.0.0.1:$target_port: returns
#                        { pid, port, ... }. Commands always reach Redis;
#                        each reply (one RESP value) meets the mode in force
#                        when it arrives:
#                          pass   forwarded;
#                          drop   read and not forwarded, and nothing more is
#                                 forwarded on that connection (later replies
#                                 would be taken for this one's): the client
#                                 sees a reply timeout;
#                          stall  held for ARG ms, then forwarded if the
#                                 client is still connected (replies after
#                                 it queue behind it);
#                          cut    half of it forwarded, then both sides
#                                 closed: the client sees the connection
#                                 close mid-reply.
#                        With drop and cut, an ARG other than 0 is how many
#                        replies meet the fault, after which the mode is
#                        pass again.
#   fault_proxy_mode($px, $mode, [$arg], [$match])
#                        switches the mode (answered once in force); with
#                        $match (a string without spaces), only the replies
#                        to commands whose first 512 bytes hold it meet the
#                        mode, the others pass
#   fault_proxy_rate($px, $bytes_per_second)
#                        Redis throttled: the commands of every connection
#                        together are taken from the client no faster than
#                        that (0: as fast as they come), so that what the
#                        client sends waits in its socket and in its own
#                        buffers; replies are not held back
#   fault_proxy_stats($px)
#                        { connections, commands, replies, forwarded,
#                        dropped, stalled, late, cut, faults } so far
#   start_trickle_proxy($port)
#                        a proxy to 127.0.0.1:$port that passes the
#                        server's bytes on 3 at a time, 1 ms apart, so
#                        replies reach the client split across many reads;
#                        returns its port
#   start_fake_redis($reply)
#                        a server that answers whatever it is sent with the
#                        raw bytes $reply and keeps the connection open;
#                        returns its port

package Idem::FaultProxy;

use strict;
use warnings;

use Errno qw(EINTR EAGAIN);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use IO::Select;
use IO::Socket::INET;
use POSIX qw(_exit);
use Socket qw(SOCK_STREAM IPPROTO_TCP TCP_NODELAY AF_UNIX PF_UNSPEC);
use Time::HiRes qw(time sleep);

use Idem::Proc;

# ---------------------------------------------------------------- fault proxy

# The end of the RESP value starting at $pos in $$buf; -1 while incomplete.
# What is not RESP is taken whole.
sub resp_end {
    my ($buf, $pos) = @_;
    my $need = 1;
    while ($need > 0) {
        my $le = index($$buf, "\r\n", $pos);
        return -1 if $le < 0;
        my $type = substr($$buf, $pos, 1);
        my $arg = substr($$buf, $pos + 1, $le - $pos - 1);
        $pos = $le + 2;
        $need--;
        if ($type eq '$') {
            return length $$buf unless $arg =~ /^-?\d+$/;
            next if $arg < 0;
            return -1 if length($$buf) < $pos + $arg + 2;
            $pos += $arg + 2;
        } elsif ($type eq '*') {
            return length $$buf unless $arg =~ /^-?\d+$/;
            $need += $arg if $arg > 0;
        } elsif ($type !~ /^[-+:]$/) {
            return length $$buf;
        }
    }
    return $pos;
}

sub fault_proxy_start {
    my ($target) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 128, Proto => 'tcp', ReuseAddr => 1,
    ) or die "Idem::FaultProxy: cannot listen for the fault proxy: $!\n";
    socketpair(my $ours, my $theirs, AF_UNIX, SOCK_STREAM, PF_UNSPEC)
        or die "Idem::FaultProxy: socketpair: $!\n";
    my $pid = fork;
    die "Idem::FaultProxy: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP ALRM);
        close $ours;
        my $ok = eval { fault_proxy_loop($listen, $theirs, $target); 1 };
        print STDERR "fault proxy: $@" unless $ok;
        _exit($ok ? 0 : 1);
    }
    close $theirs;
    Idem::Proc::track($pid);
    my $px = { pid => $pid, port => $listen->sockport, ctl => $ours, buf => '' };
    close $listen;
    return $px;
}

sub fault_proxy_loop {
    my ($listen, $ctl, $target) = @_;
    my $nonblock = sub { my $fl = fcntl($_[0], F_GETFL, 0); fcntl($_[0], F_SETFL, $fl | O_NONBLOCK) };
    $nonblock->($listen);
    my ($mode, $hold, $match, $left) = ('pass', 0, undef, 0);
    my ($rate, $tokens, $refilled) = (0, 0, time);    # bytes per second from the clients, and what may come now
    my %st = map { $_ => 0 } qw(connections commands replies forwarded dropped stalled late cut);
    my @pairs;
    my $ctl_buf = '';
    my $deadline = time + 1800;     # the parent ends it long before
    my $close = sub {
        my ($pr) = @_;
        return if $pr->{closed};
        $pr->{closed} = 1;
        close $pr->{c};
        close $pr->{s};
    };
    while (time < $deadline) {
        @pairs = grep { !$_->{closed} } @pairs;
        my $now = time;
        my ($rin, $win) = ('', '');
        vec($rin, fileno $listen, 1) = 1;
        vec($rin, fileno $ctl, 1) = 1;
        my $timeout = 0.05;
        # throttled: 64 KB at a time, once the rate allows it
        if ($rate) {
            $tokens += ($now - $refilled) * $rate;
            $tokens = 65536 if $tokens > 65536;
            $refilled = $now;
            $timeout = (65536 - $tokens) / $rate if $tokens < 65536 && (65536 - $tokens) / $rate < $timeout;
        }
        my $take = !$rate || $tokens >= 65536 ? 65536 : 0;
        for my $pr (@pairs) {
            vec($rin, fileno $pr->{c}, 1) = 1 if $take > 0;
            vec($rin, fileno $pr->{s}, 1) = 1 unless $pr->{cutting};
            vec($win, fileno $pr->{c}, 1) = 1 if length $pr->{down};
            vec($win, fileno $pr->{s}, 1) = 1 if length $pr->{up};
            if (@{ $pr->{q} }) {
                my $until = $pr->{q}[0][1] - $now;
                $timeout = $until < 0 ? 0 : $until if $until < $timeout;
            }
        }
        my ($rout, $wout) = ($rin, $win);
        my $n = select($rout, $wout, undef, $timeout);
        next if $n < 0 && $! == EINTR;
        $now = time;
        if (vec($rout, fileno $ctl, 1)) {
            my $got = sysread($ctl, $ctl_buf, 4096, length $ctl_buf);
            return if defined $got && $got == 0;    # the parent is gone
            while ($ctl_buf =~ s/^([^\n]*)\n//) {
                my ($cmd, @arg) = split ' ', $1;
                if (($cmd // '') eq 'mode') {
                    ($mode, $hold, $match) = ($arg[0], ($arg[1] // 0) / 1000, $arg[2]);
                    $left = $mode eq 'cut' || $mode eq 'drop' ? $arg[1] // 0 : 0;
                    syswrite($ctl, "ok\n");
                } elsif (($cmd // '') eq 'rate') {
                    ($rate, $tokens, $refilled) = ($arg[0] // 0, 0, time);
                    syswrite($ctl, "ok\n");
                } elsif (($cmd // '') eq 'stats') {
                    syswrite($ctl, join(' ', 'stats', map { "$_=$st{$_}" } sort keys %st) . "\n");
                }
            }
        }
        if (vec($rout, fileno $listen, 1)) {
            while (my $c = $listen->accept) {
                my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target, Proto => 'tcp', Timeout => 2);
                if (!$s) { close $c; next }
                $nonblock->($_) for $c, $s;
                setsockopt($_, IPPROTO_TCP, TCP_NODELAY, 1) for $c, $s;
                $st{connections}++;
                push @pairs, { c => $c, s => $s, up => '', down => '', cmds => '', replies => '', q => [], sent => [] };
            }
        }
        for my $pr (@pairs) {
            next if $pr->{closed};
            if ($take > 0 && vec($rout, fileno $pr->{c}, 1)) {     # nginx -> Redis: always passed on
                my $got = sysread($pr->{c}, my $buf, $take);
                if (!defined $got) { $close->($pr) unless $! == EAGAIN || $! == EINTR; next }
                if ($got == 0) { $close->($pr); next }
                if ($rate) {
                    $tokens -= $got;
                    $take = 0;
                }
                $pr->{up} .= $buf;
                $pr->{cmds} .= $buf;
                while ((my $end = resp_end(\$pr->{cmds}, 0)) > 0) {
                    push @{ $pr->{sent} }, substr($pr->{cmds}, 0, $end > 512 ? 512 : $end);
                    substr($pr->{cmds}, 0, $end, '');
                    $st{commands}++;
                }
            }
            if (!$pr->{cutting} && vec($rout, fileno $pr->{s}, 1)) {     # Redis -> nginx: the faults
                my $got = sysread($pr->{s}, my $buf, 65536);
                if (!defined $got) { $close->($pr) unless $! == EAGAIN || $! == EINTR; next }
                if ($got == 0) { $close->($pr); next }
                $pr->{replies} .= $buf;
                while ((my $end = resp_end(\$pr->{replies}, 0)) > 0) {
                    my $reply = substr($pr->{replies}, 0, $end, '');
                    $st{replies}++;
                    my $cmd = shift @{ $pr->{sent} } // '';
                    my $fault = defined $match && index($cmd, $match) < 0 ? 'pass' : $mode;
                    if (!$pr->{dead} && $left && ($fault eq 'drop' || $fault eq 'cut')) {
                        $mode = 'pass' if --$left == 0;    # this one meets it, the next pass
                    }
                    if ($pr->{dead} || $fault eq 'drop') {
                        $st{dropped}++;
                        $pr->{dead} = 1;
                    } elsif ($fault eq 'cut') {
                        $st{cut}++;
                        push @{ $pr->{q} }, [substr($reply, 0, int(length($reply) / 2) || 1), $now, 0];
                        $pr->{dead} = $pr->{cutting} = 1;
                    } elsif ($fault eq 'stall') {
                        $st{stalled}++;
                        push @{ $pr->{q} }, [$reply, $now + $hold, 1];
                    } else {
                        push @{ $pr->{q} }, [$reply, $now, 0];
                    }
                }
            }
            while (@{ $pr->{q} } && $pr->{q}[0][1] <= $now) {
                my $item = shift @{ $pr->{q} };
                $pr->{down} .= $item->[0];
                $st{ $item->[2] ? 'late' : 'forwarded' }++ unless $pr->{cutting};
            }
            for my $dir (['down', 'c'], ['up', 's']) {
                my ($b, $sock) = @$dir;
                next unless length $pr->{$b};
                my $w = syswrite($pr->{$sock}, $pr->{$b});
                if (!defined $w) { $close->($pr) unless $! == EAGAIN || $! == EINTR; last }
                substr($pr->{$b}, 0, $w, '');
            }
            $close->($pr) if $pr->{cutting} && !$pr->{closed} && !length $pr->{down} && !@{ $pr->{q} };
        }
    }
}

# One line to the proxy and its answer line.
sub fault_proxy_ask {
    my ($px, $line) = @_;
    syswrite($px->{ctl}, "$line\n") or die "Idem::FaultProxy: fault proxy: write: $!\n";
    my $deadline = time + 5;
    while ($px->{buf} !~ /\n/) {
        my $left = $deadline - time;
        die "Idem::FaultProxy: the fault proxy did not answer '$line'\n" if $left <= 0;
        my $rin = '';
        vec($rin, fileno $px->{ctl}, 1) = 1;
        next unless select($rin, undef, undef, $left) > 0;
        my $n = sysread($px->{ctl}, $px->{buf}, 4096, length $px->{buf});
        die "Idem::FaultProxy: the fault proxy is gone\n" if defined $n && $n == 0;
    }
    $px->{buf} =~ s/^([^\n]*)\n//;
    return $1;
}

sub fault_proxy_mode {
    my ($px, $mode, $arg, $match) = @_;
    die "Idem::FaultProxy: a match holds no space\n" if defined $match && $match =~ /\s/;
    return fault_proxy_ask($px, "mode $mode " . ($arg // 0) . (defined $match ? " $match" : ''));
}

sub fault_proxy_rate {
    my ($px, $rate) = @_;
    return fault_proxy_ask($px, 'rate ' . int($rate // 0));
}

sub fault_proxy_stats {
    my ($px) = @_;
    my %st = fault_proxy_ask($px, 'stats') =~ /(\w+)=(\d+)/g;
    $st{faults} = ($st{dropped} // 0) + ($st{stalled} // 0) + ($st{cut} // 0);
    return \%st;
}

# ---------------------------------------------------------------- trickle proxy, fake Redis

sub start_trickle_proxy {
    my ($target) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp', ReuseAddr => 1,
    ) or die "Idem::FaultProxy: cannot listen for the trickle proxy: $!\n";
    my $port = $listen->sockport;
    my $pid = fork;
    die "Idem::FaultProxy: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        trickle_loop($listen, $target);
        _exit(0);
    }
    close $listen;
    Idem::Proc::track($pid);
    return $port;
}

# Relays every accepted connection to 127.0.0.1:$target; client bytes pass
# as they come, server bytes 3 at a time. Ends when its parent stops it.
sub trickle_loop {
    my ($listen, $target) = @_;
    my $select = IO::Select->new($listen);
    my %peer;
    my $deadline = time + 3600;
    while (time < $deadline) {
        for my $fh ($select->can_read(1)) {
            if ($fh == $listen) {
                my $client = $listen->accept or next;
                my $server = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target, Proto => 'tcp')
                    or do { close $client; next };
                @peer{$client, $server} = ($server, $client);
                $select->add($client, $server);
                next;
            }
            my $other = $peer{$fh} or next;
            my $n = sysread($fh, my $buf, 65536);
            if (!$n) {
                $select->remove($fh, $other);
                delete @peer{$fh, $other};
                close $fh;
                close $other;
                next;
            }
            my $from_server = $fh->peerport == $target;
            my $step = $from_server ? 3 : length $buf;
            for (my $off = 0; $off < length $buf; $off += $step) {
                syswrite($other, substr($buf, $off, $step)) // last;
                sleep 0.001 if $from_server;
            }
        }
    }
}

sub start_fake_redis {
    my ($reply) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp', ReuseAddr => 1,
    ) or die "Idem::FaultProxy: cannot listen for the fake Redis: $!\n";
    my $port = $listen->sockport;
    my $pid = fork;
    die "Idem::FaultProxy: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        my $select = IO::Select->new($listen);
        my $deadline = time + 3600;
        while (time < $deadline) {
            for my $fh ($select->can_read(1)) {
                if ($fh == $listen) {
                    my $c = $listen->accept or next;
                    $select->add($c);
                    next;
                }
                my $n = sysread($fh, my $buf, 65536);
                if (!$n) { $select->remove($fh); close $fh; next }
                syswrite($fh, $reply);
            }
        }
        _exit(0);
    }
    close $listen;
    Idem::Proc::track($pid);
    return $port;
}

1;
