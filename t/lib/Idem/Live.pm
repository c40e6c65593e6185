# Idem/Live.pm — clients of a response that streams: a request on its own
# connection whose response is read as it comes (its head, its body
# de-chunked), so that a test can follow an original and its joiners event
# by event; and the gates of scripts/upstream.pl's event streams. Core Perl
# and the fixtures (Idem::Upstream) only; does not need Test::Nginx.
#
#     use Idem::Live;
#     my $s = Idem::Live::post($port, '/live/1?sse=3&gate=g1', 'key-1');
#     $s->body_has('event 1 of 3');          # waits for it (dies after 10 s)
#     Idem::Live::open_gate('g1', 3);
#     my $res = $s->finish;                  # {status, headers, body, complete}
#
# API:
#   post($port, $uri, $key, [$headers])
#                     POSTs "x" to 127.0.0.1:$port with Idempotency-Key
#                     $key (and the raw header lines $headers); returns a
#                     stream. HTTP/1.1, Connection: close.
#   h2_post($port, $uri, $key)
#                     the same POST over HTTP/2 (h2c, prior knowledge), by
#                     curl on a pipe: the same stream API; its body is what
#                     curl got, complete when curl says the stream ended
#                     whole (exit status 0); finish also gives its trailers
#                     ("name: value" lines joined by "\n", from curl's
#                     trace). close stops curl (by its pid).
#   $s->head          waits for the response head; returns {status,
#                     headers (lower-case names)}
#   $s->body_has($text, [$secs])
#                     waits until the body so far holds $text; returns the
#                     body so far
#   $s->body          the body read so far (de-chunked)
#   $s->body_length($n, [$secs])
#                     waits until the body so far has at least $n bytes;
#                     returns the body so far
#   $s->finish([$secs], [$keep_open])
#                     reads to the end of the connection; returns {status,
#                     headers, body, complete}: complete when the body ended
#                     as its framing says (the last chunk, or
#                     Content-Length bytes), not cut off. With $keep_open
#                     the client keeps its end open (as a client that does
#                     not close at once holds nginx's lingering close) until
#                     $s->close
#   $s->close         the client goes away
#   open_gate($name, $n)
#                     lets the upstream's event stream behind gate $name
#                     send up to event $n
# What another gateway writes in the store while its original streams, for
# a test that plays that gateway (module/record.hpp, module/live_log.hpp):
#   fingerprint($uri, [$body])
#                     the fingerprint of a POST of $body (default "x") to
#                     $uri, as post() sends it
#   claim_record($fingerprint, $token)
#                     a claim in flight, its token $token (16 bytes or more)
#   live_key($store_key, $token)
#                     where that claim's live log is
#   live_start(), live_head($fingerprint, $status, @headers),
#   live_body($bytes), live_end($how)
#                     a live log's parts: its start, its head (@headers:
#                     [name, value] pairs), a body frame, its end ($how:
#                     1 complete, 2 aborted, 3 cut)

package Idem::Live;

use strict;
use warnings;

use Errno qw(EINTR);
use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use POSIX qw(_exit);
use Time::HiRes qw(time);

use Idem::Upstream ();

use constant IO_TIMEOUT => 10;

sub post {
    my ($port, $uri, $key, $headers) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp',
                                     Timeout => IO_TIMEOUT)
        or die "Idem::Live: cannot connect to 127.0.0.1:$port: $!\n";
    $sock->autoflush(1);
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" . ($headers // '')
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx"
        or die "Idem::Live: cannot send: $!\n";
    return bless { sock => $sock, raw => '', eof => 0, uri => $uri }, __PACKAGE__;
}

sub h2_post {
    my ($port, $uri, $key) = @_;
    my @cmd = ('curl', '-s', '-v', '-N', '-i', '--http2-prior-knowledge', '-X', 'POST', '--data-binary', 'x',
               '-H', "Idempotency-Key: $key", '--max-time', 2 * IO_TIMEOUT, "http://127.0.0.1:$port$uri");
    my $trace = File::Temp->new(TEMPLATE => 'live-h2-XXXXXX', TMPDIR => 1);
    my $pid = open(my $out, '-|') // die "Idem::Live: fork: $!\n";
    if ($pid == 0) {
        open STDERR, '>', $trace->filename or _exit(127);
        exec @cmd or _exit(127);
    }
    return bless { sock => $out, raw => '', eof => 0, uri => $uri, h2 => 1, pid => $pid, trace => $trace },
        __PACKAGE__;
}

# The trailers of an HTTP/2 response once curl is done, from its trace (the
# "< " lines after the head's empty one): curl prints them on its output
# too, after the body, or not, as they came.
sub _h2_trailers {
    my ($self) = @_;
    return [] unless defined $self->{exit};
    open my $fh, '<', $self->{trace}->filename or return [];
    my ($head_done, @trailers);
    while (my $line = <$fh>) {
        next unless $line =~ /^< (.*?)\r?$/;
        if (!$head_done) { $head_done = 1 if $1 eq ''; next }
        push @trailers, $1 if length $1;
    }
    return \@trailers;
}

sub open_gate {
    my ($name, $n) = @_;
    my ($status) = Idem::Upstream::http_get("/_gate/$name/$n");
    die "Idem::Live: gate $name: status $status\n" unless $status == 200;
}

# Reads what is there (waiting at most until $deadline); false at EOF.
sub _read {
    my ($self, $deadline) = @_;
    return 0 if $self->{eof};
    my $sel = IO::Select->new($self->{sock});
    my $left = $deadline - time;
    return 1 if $left <= 0 || !$sel->can_read($left);
    my $n = sysread($self->{sock}, $self->{raw}, 65536, length $self->{raw});
    return 1 if !defined $n && $! == EINTR;
    $self->{eof} = 1 unless $n;
    return !$self->{eof};
}

# The head and the body as far as the bytes go.
sub _parse {
    my ($self) = @_;
    my ($head, $rest) = split /\r\n\r\n/, $self->{raw}, 2;
    return undef unless defined $rest;
    my ($status) = $head =~ m{\AHTTP/(?:1\.\d|2) (\d{3})} or die "Idem::Live: not an HTTP response\n";
    my %headers = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head;
    my ($body, $complete) = ('', 0);
    my $trailers = [];
    if ($self->{h2}) {
        ($body, $complete) = ($rest, defined $self->{exit} && $self->{exit} == 0);
        $trailers = $self->_h2_trailers;
        my $printed = join '', map { "$_\r\n" } @$trailers;
        substr($body, -length $printed) = '' if @$trailers && substr($body, -length $printed) eq $printed;
    } elsif (($headers{'transfer-encoding'} // '') =~ /chunked/i) {
        while ($rest =~ /\A([0-9a-fA-F]+)[^\r\n]*\r\n/) {
            my ($size, $at) = (hex $1, length $&);
            if ($size == 0) {
                $complete = 1 if $rest =~ /\A[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/;
                last;
            }
            last if length($rest) < $at + $size + 2;
            $body .= substr($rest, $at, $size);
            $rest = substr($rest, $at + $size + 2);
        }
    } else {
        $body = $rest;
        $complete = defined $headers{'content-length'} && length($body) == $headers{'content-length'};
    }
    return { status => $status, headers => \%headers, body => $body, complete => $complete,
             trailers => join("\n", @$trailers) };
}

sub head {
    my ($self, $secs) = @_;
    my $deadline = time + ($secs // IO_TIMEOUT);
    until (defined(my $res = $self->_parse)) {
        die "Idem::Live: no response head for $self->{uri}\n" if time >= $deadline || !$self->_read($deadline);
    }
    my $res = $self->_parse;
    return { status => $res->{status}, headers => $res->{headers} };
}

sub body {
    my ($self) = @_;
    my $res = $self->_parse;
    return $res ? $res->{body} : '';
}

sub body_length {
    my ($self, $n, $secs) = @_;
    my $deadline = time + ($secs // IO_TIMEOUT);
    until (length($self->body) >= $n) {
        die "Idem::Live: fewer than $n bytes in the body of $self->{uri} (got " . length($self->body) . ")\n"
            if time >= $deadline || !$self->_read($deadline);
    }
    return $self->body;
}

sub body_has {
    my ($self, $text, $secs) = @_;
    my $deadline = time + ($secs // IO_TIMEOUT);
    until (index($self->body, $text) >= 0) {
        die "Idem::Live: \"$text\" not in the body of $self->{uri} (got \"" . $self->body . "\")\n"
            if time >= $deadline || !$self->_read($deadline);
    }
    return $self->body;
}

sub finish {
    my ($self, $secs, $keep_open) = @_;
    my $deadline = time + ($secs // IO_TIMEOUT);
    while ($self->_read($deadline)) {
        die "Idem::Live: $self->{uri} did not end\n" if time >= $deadline;
    }
    $self->_reap unless $keep_open;
    return $self->_parse // { status => 0, headers => {}, body => '', complete => 0 };
}

sub close {
    my ($self) = @_;
    kill 'TERM', $self->{pid} if $self->{pid} && !defined $self->{exit};
    $self->_reap;
    $self->{eof} = 1;
}

# The connection closed; curl's exit status kept.
sub _reap {
    my ($self) = @_;
    return if $self->{closed}++;
    CORE::close($self->{sock});    # a pipe's close waits for curl
    $self->{exit} = ($? & 127) ? 128 + ($? & 127) : $? >> 8 if $self->{pid};
}

# ------------------------------------------------ another gateway's live log

sub fingerprint {
    my ($uri, $body) = @_;
    require Digest::SHA;
    return Digest::SHA::sha256("POST\n$uri\n" . ($body // 'x'));
}

sub claim_record {
    my ($fingerprint, $token) = @_;
    return "IDM\x01\x01" . $fingerprint . chr(length $token) . $token;
}

sub live_key {
    my ($store_key, $token) = @_;
    return $store_key . unpack('H*', $token);
}

sub _frame { my ($type, $payload) = @_; return $type . pack('N', length $payload) . $payload }

sub live_start { "IDL\x01" }

sub live_head {
    my ($fingerprint, $status, @headers) = @_;
    return _frame('H', "IDM\x01\x02" . $fingerprint . pack('n n', $status, scalar @headers)
                       . join('', map { pack('n', length $_->[0]) . $_->[0] . pack('N', length $_->[1]) . $_->[1] }
                                  @headers)
                       . pack('N', 0));
}

sub live_body { _frame('B', $_[0]) }

sub live_end { _frame('E', chr $_[0]) }

1;
