# Idem/HTTP.pm — an HTTP/1.1 load client on plain sockets: many requests
# in flight over keep-alive connections, retries and delays, one loop, no
# threads. Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::HTTP;
#     my $res = Idem::HTTP::http_once({ port => $port, method => 'GET', path => '/health' });
#
# A request is a hash: port, method, path, headers ([[name, value], ...]),
# body, timeout (s, default 15), close (send Connection: close), plus
# whatever fields the caller keeps in it. A result is a hash: status,
# headers (lower-cased name => value, repeated ones joined), hlist, body,
# keepalive; or error (connect/read/timeout/closed...); plus elapsed and
# done_at.
#
# API (nothing is exported):
#   pool_new(%o)          o{concurrency} (default 32) requests in flight at
#                         most; o{on_done}->($req, $res, $pool) may submit
#                         more; o{feed}->($pool) hands out new requests
#                         until it returns undef; o{on_tick}->($pool) runs
#                         every loop turn and returns true while it has work
#                         of its own. Fields read by callers: completed,
#                         started, nactive, ready, conc.
#   pool_submit($pool, $req, [$delay])
#                         queue a request, sent no sooner than $delay s
#   pool_run($pool, $deadline)
#                         runs until all work is done (1) or the epoch
#                         second $deadline (0; what is in flight fails with
#                         "aborted at the time limit")
#   http_once($req, [$timeout])
#                         one request, synchronously
#   open_request($req)    sends one request (Connection: close) on a socket
#                         of its own and returns its state, to collect
#   collect_response($state, $secs)
#                         its result once it has come (waits up to $secs),
#                         or undef if it has not yet
#   request_bytes($req), parse_response(\$buf, $eof, $method)

package Idem::HTTP;

use strict;
use warnings;

use Errno qw(EINTR EAGAIN EWOULDBLOCK EINPROGRESS);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use IO::Socket::INET;
use POSIX qw(strerror);
use Socket qw(PF_INET SOCK_STREAM IPPROTO_TCP SOL_SOCKET SO_ERROR TCP_NODELAY pack_sockaddr_in inet_aton);
use Time::HiRes qw(time sleep);

use constant {
    CONCURRENCY     => 32,
    REQUEST_TIMEOUT => 15,
};

sub request_bytes {
    my ($r) = @_;
    my $body = $r->{body} // '';
    my $s = "$r->{method} $r->{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    $s .= "$_->[0]: $_->[1]\r\n" for @{ $r->{headers} // [] };
    $s .= 'Content-Length: ' . length($body) . "\r\n" if $r->{method} ne 'GET' || length $body;
    $s .= "Connection: close\r\n" if $r->{close};
    return "$s\r\n$body";
}

# Parses one response off the front of $$buf; undef when incomplete.
sub parse_response {
    my ($buf, $eof, $method) = @_;
    for (1 .. 5) {      # skips interim 1xx responses
        my $hend = index($$buf, "\r\n\r\n");
        return undef if $hend < 0;
        my ($status_line, @lines) = split /\r\n/, substr($$buf, 0, $hend);
        my ($version, $status) = ($status_line // '') =~ m{^HTTP/(1\.[01]) (\d{3})}
            or return { error => 'malformed status line' };
        my (%h, @list);
        for my $line (@lines) {
            my ($k, $v) = $line =~ /^([^:]+):\s*(.*?)\s*$/ or next;
            push @list, [$k, $v];
            my $lk = lc $k;
            $h{$lk} = exists $h{$lk} ? "$h{$lk}, $v" : $v;
        }
        my $pos = $hend + 4;
        if ($status < 200) { substr($$buf, 0, $pos, ''); next }
        my $conn = lc($h{connection} // '');
        my $keepalive = $version eq '1.1' ? $conn !~ /close/ : $conn =~ /keep-alive/;
        my $body = '';
        if ($method eq 'HEAD' || $status == 204 || $status == 304) {
            # no body
        } elsif (lc($h{'transfer-encoding'} // '') =~ /chunked/) {
            my $p = $pos;
            for (my $guard = 0; ; $guard++) {
                return { error => 'too many chunks' } if $guard > 100_000;
                my $le = index($$buf, "\r\n", $p);
                return undef if $le < 0;
                my ($hex) = substr($$buf, $p, $le - $p) =~ /^([0-9a-fA-F]+)/
                    or return { error => 'malformed chunk' };
                my $size = hex $hex;
                $p = $le + 2;
                if ($size == 0) {
                    for (1 .. 100) {
                        my $te = index($$buf, "\r\n", $p);
                        return undef if $te < 0;
                        my $empty = $te == $p;
                        $p = $te + 2;
                        last if $empty;
                    }
                    last;
                }
                return undef if length($$buf) < $p + $size + 2;
                $body .= substr($$buf, $p, $size);
                $p += $size + 2;
            }
            $pos = $p;
        } elsif (defined $h{'content-length'}) {
            my $cl = $h{'content-length'};
            return { error => 'bad content-length' } unless $cl =~ /^\d+$/;
            return undef if length($$buf) < $pos + $cl;
            $body = substr($$buf, $pos, $cl);
            $pos += $cl;
        } else {
            return undef unless $eof;
            $body = substr($$buf, $pos);
            $pos = length $$buf;
            $keepalive = 0;
        }
        substr($$buf, 0, $pos, '');
        return { status => $status + 0, headers => \%h, hlist => \@list, body => $body,
                 keepalive => $keepalive };
    }
    return { error => 'too many interim responses' };
}

sub new_conn {
    my ($port) = @_;
    socket(my $s, PF_INET, SOCK_STREAM, 0) or return (undef, "socket: $!");
    my $flags = fcntl($s, F_GETFL, 0);
    fcntl($s, F_SETFL, $flags | O_NONBLOCK) or return (undef, "fcntl: $!");
    setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
    my $c = { sock => $s, fd => fileno($s), port => $port, state => 'connecting', uses => 0 };
    if (connect($s, pack_sockaddr_in($port, inet_aton('127.0.0.1')))) {
        $c->{state} = 'writing';
    } elsif ($! != EINPROGRESS) {
        my $e = "$!";
        close $s;
        return (undef, "connect: $e");
    }
    return ($c, undef);
}

# A pool runs requests with at most `concurrency` in flight, over keep-alive
# connections. on_done($req, $res, $pool) may submit more (retries, with a
# delay); feed() hands out new requests until it returns undef; on_tick($pool)
# runs every loop turn and returns true while it still has work of its own.
sub pool_new {
    my (%o) = @_;
    return {
        conc => $o{concurrency} // CONCURRENCY, ready => [], delayed => [],
        conns => {}, idle => {}, nactive => 0, on_done => $o{on_done},
        feed => $o{feed}, on_tick => $o{on_tick}, fed_all => !$o{feed},
        started => 0, completed => 0,
    };
}

sub pool_submit {
    my ($p, $req, $delay) = @_;
    if ($delay && $delay > 0) {
        my $at = time + $delay;
        $req->{not_before} = $at;
        my $d = $p->{delayed};
        my ($lo, $hi) = (0, scalar @$d);        # sorted insert
        while ($lo < $hi) {
            my $mid = int(($lo + $hi) / 2);
            if ($d->[$mid]{not_before} <= $at) { $lo = $mid + 1 } else { $hi = $mid }
        }
        splice @$d, $lo, 0, $req;
    } else {
        push @{ $p->{ready} }, $req;
    }
}

sub conn_close {
    my ($p, $c) = @_;
    delete $p->{conns}{ $c->{fd} };
    $c->{state} = 'closed';
    close $c->{sock};
}

sub req_finish {
    my ($p, $c, $req, $res) = @_;
    if ($c) {
        $p->{nactive}--;
        $c->{req} = undef;
        if ($res->{error} || !$res->{keepalive} || length $c->{rbuf}) {
            conn_close($p, $c);
        } else {
            $c->{state} = 'idle';
            push @{ $p->{idle}{ $c->{port} } }, $c;
        }
    }
    $res->{elapsed} = time - $req->{sent_at};
    $res->{done_at} = time;
    $p->{completed}++;
    $p->{on_done}->($req, $res, $p) if $p->{on_done};
}

sub req_fail {
    my ($p, $c, $why) = @_;
    my $req = $c->{req};
    req_finish($p, $c, $req, { error => $why });
}

sub req_start {
    my ($p, $req) = @_;
    $req->{sent_at} = time;
    $p->{started}++;
    my $c;
    my $idle = $p->{idle}{ $req->{port} } //= [];
    while (my $ic = pop @$idle) {
        if ($ic->{state} eq 'idle') { $c = $ic; last }
    }
    if (!$c) {
        my $err;
        ($c, $err) = new_conn($req->{port});
        if (!$c) {
            req_finish($p, undef, $req, { error => $err });
            return;
        }
        $p->{conns}{ $c->{fd} } = $c;
    } else {
        $c->{state} = 'writing';
    }
    $p->{nactive}++;
    $c->{reused}   = $c->{uses}++ > 0;
    $c->{req}      = $req;
    $c->{wbuf}     = request_bytes($req);
    $c->{rbuf}     = '';
    $c->{deadline} = time + ($req->{timeout} // REQUEST_TIMEOUT);
    conn_write($p, $c) if $c->{state} eq 'writing';
}

sub conn_write {
    my ($p, $c) = @_;
    if ($c->{state} eq 'connecting') {
        my $err = unpack 'i', getsockopt($c->{sock}, SOL_SOCKET, SO_ERROR) // pack('i', 0);
        return req_fail($p, $c, 'connect: ' . strerror($err)) if $err;
        $c->{state} = 'writing';
    }
    while (length $c->{wbuf}) {
        my $n = syswrite($c->{sock}, $c->{wbuf});
        if (!defined $n) {
            return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
            return req_fail($p, $c, "write: $!" . ($c->{reused} ? ' (reused connection)' : ''));
        }
        substr($c->{wbuf}, 0, $n, '');
    }
    $c->{state} = 'reading';
}

sub conn_read {
    my ($p, $c) = @_;
    my $n = sysread($c->{sock}, $c->{rbuf}, 65536, length $c->{rbuf});
    if (!defined $n) {
        return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
        return conn_close($p, $c) if $c->{state} eq 'idle';
        return req_fail($p, $c, "read: $!" . ($c->{reused} && $c->{rbuf} eq '' ? ' (reused connection)' : ''));
    }
    if ($c->{state} eq 'idle') {    # the server closed an idle connection
        return conn_close($p, $c);
    }
    my $eof = $n == 0;
    my $res = parse_response(\$c->{rbuf}, $eof, $c->{req}{method});
    if ($res) {
        $res->{keepalive} = 0 if $eof;
        return req_finish($p, $c, $c->{req}, $res);
    }
    if ($eof) {
        return req_fail($p, $c, 'closed before a response'
            . ($c->{reused} && $c->{rbuf} eq '' ? ' (reused connection)' : ''));
    }
}

# Runs the pool until all work is done (returns 1) or $deadline (returns 0,
# aborting what is in flight).
sub pool_run {
    my ($p, $deadline) = @_;
    my $rin_template;
    while (1) {
        my $now = time;
        my $d = $p->{delayed};
        push @{ $p->{ready} }, shift @$d while @$d && $d->[0]{not_before} <= $now;
        while ($p->{nactive} < $p->{conc}) {
            my $req = shift @{ $p->{ready} };
            if (!$req && !$p->{fed_all}) {
                $req = $p->{feed}->($p);
                $p->{fed_all} = 1 unless $req;
            }
            last unless $req;
            req_start($p, $req);
        }
        my $busy = $p->{on_tick} ? $p->{on_tick}->($p) : 0;
        if (!$busy && !$p->{nactive} && !@{ $p->{ready} } && !@$d && $p->{fed_all}) {
            for my $c (values %{ $p->{conns} }) { conn_close($p, $c) }
            return 1;
        }
        if ($now > $deadline) {
            for my $c (values %{ $p->{conns} }) {
                if ($c->{req}) { req_fail($p, $c, 'aborted at the time limit') }
                else { conn_close($p, $c) }
            }
            return 0;
        }

        my ($rin, $win) = ('', '');
        my $any = 0;
        for my $c (values %{ $p->{conns} }) {
            my $st = $c->{state};
            if ($st eq 'reading' || $st eq 'idle') { vec($rin, $c->{fd}, 1) = 1; $any = 1 }
            elsif ($st eq 'connecting' || $st eq 'writing') { vec($win, $c->{fd}, 1) = 1; $any = 1 }
        }
        my $timeout = 0.02;
        $timeout = 0 if @{ $p->{ready} } && $p->{nactive} < $p->{conc};
        if (@$d) {
            my $until = $d->[0]{not_before} - time;
            $timeout = $until if $until < $timeout;
            $timeout = 0 if $timeout < 0;
        }
        if (!$any) { sleep $timeout if $timeout > 0; next }
        my ($rout, $wout) = ($rin, $win);
        my $n = select($rout, $wout, undef, $timeout);
        $now = time;
        if ($n > 0) {
            for my $c (values %{ $p->{conns} }) {
                next if $c->{state} eq 'closed';
                if (($c->{state} eq 'connecting' || $c->{state} eq 'writing') && vec($wout, $c->{fd}, 1)) {
                    conn_write($p, $c);
                } elsif (($c->{state} eq 'reading' || $c->{state} eq 'idle') && vec($rout, $c->{fd}, 1)) {
                    conn_read($p, $c);
                }
            }
        }
        for my $c (values %{ $p->{conns} }) {
            next unless $c->{req} && $c->{state} ne 'closed';
            req_fail($p, $c, 'timeout') if $now > $c->{deadline};
        }
    }
}

# One request, synchronously (through a pool of one).
sub http_once {
    my ($req, $timeout) = @_;
    my $res;
    my $p = pool_new(concurrency => 1, on_done => sub { $res = $_[1] });
    $req->{timeout} //= $timeout // REQUEST_TIMEOUT;
    pool_submit($p, $req);
    pool_run($p, time + ($timeout // REQUEST_TIMEOUT) + 1);
    return $res // { error => 'no response' };
}

# A request whose response the caller collects when it wants.
sub open_request {
    my ($req) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $req->{port}, Proto => 'tcp', Timeout => 5,
    ) or return { error => "connect: $!" };
    $sock->autoflush(1);
    syswrite($sock, request_bytes({ %$req, close => 1 })) or return { error => "write: $!" };
    return { sock => $sock, buf => '', method => $req->{method}, sent_at => time };
}

# Waits up to $secs for the response of open_request: the result, or undef
# if it has not arrived yet.
sub collect_response {
    my ($st, $secs) = @_;
    return $st if $st->{error};
    my $deadline = time + $secs;
    while (1) {
        my $res = parse_response(\$st->{buf}, 0, $st->{method});
        return $res if $res;
        my $left = $deadline - time;
        return undef if $left <= 0;
        my $rin = '';
        vec($rin, fileno $st->{sock}, 1) = 1;
        next unless select($rin, undef, undef, $left) > 0;
        my $n = sysread($st->{sock}, $st->{buf}, 65536, length $st->{buf});
        next if !defined $n && $! == EINTR;
        if (!$n) {
            my $why = defined $n ? 'closed' : "$!";
            $res = parse_response(\$st->{buf}, 1, $st->{method});
            return $res if $res;
            return { error => "connection $why before a response" };
        }
    }
}

1;
