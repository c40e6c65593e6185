#!/usr/bin/env perl
# upstream.pl — the "payments" upstream used by the test suite and `make run`.
#
# A small HTTP/1.1 server (core Perl modules only) that counts every request
# it executes, so tests can tell whether nginx forwarded a retried POST or
# answered it from the idempotency cache.
#
#   scripts/upstream.pl --listen 127.0.0.1:PORT [--state-dir DIR] [--pid-file F]
#
# Binds loopback only (PORT 0 picks a free port) and prints
# "upstream listening on 127.0.0.1:PORT" once ready. One forked child per
# connection; every response is sent with Connection: close.
#
# Every request other than the control endpoints is an *execution*: it bumps
# a counter for the request path (query excluded), kept in a file per path
# under the state dir and incremented under flock, so it is shared by all
# children; then it logs "execution N METHOD PATH?QUERY body=LEN" to stdout.
#
# Query parameters shape the response (all optional):
#   status=NNN     response status, 100..999 (default 201): outside 200..599
#                  (a 1xx, 600 or more) no final answer, which nginx's proxy
#                  passes on as it is
#   sleep=SECS     delay before responding (float; counted before the delay)
#   size=N         body of exactly N bytes of the pattern a-zA-Z0-9\n repeated
#                  (text/plain) instead of the JSON body
#   binary=1       body of the byte values 0..255 repeated, `size` bytes long
#   kind=K         a body that compresses as real ones do (scripts/Bodies.pm):
#                  ack, payment, list, document, transcript or noise, of
#                  `size` bytes when given, with its content type
#                  (default 256) (application/octet-stream)
#   chunked=1      Transfer-Encoding: chunked, body sent in up to 4 chunks
#   cookies=N      N headers "Set-Cookie: c<i>=v<i>", i = 1..N, in order
#   header=N:V     extra response header (may repeat; a Content-Type given
#                  this way replaces the default one; an event stream, sse=N,
#                  keeps its own)
#   raw_header=N:V the same, its name any visible ASCII but ':' (one that is
#                  not an HTTP token, such as X(Y), which nginx's proxy passes
#                  on), its value without CR, LF or NUL
#   echo=NAME      the request's header NAME sent back as "X-Echo-NAME: value"
#                  (may repeat; "-" when the request had none)
#   trickle=SECS   send the body in up to 4 pieces, SECS apart (with gate=NAME:
#                  piece I (I >= 2) waits until gate NAME is open to I)
#   reset=1        send the headers and half the body, then close with
#                  SO_LINGER 0 (the peer sees a connection reset)
#   sse=N          an event stream instead (text/event-stream, chunked):
#                  N events "id: I\ndata: event I of N\n\n", one chunk each
#   gate=NAME      ... event I (I >= 2) waits until gate NAME is open to I
#                  (GET /_gate/NAME/I opens it; bounded by 60 s)
#   gap=SECS       ... or SECS between events
#   die_after=K    ... and after event K the connection is reset (SO_LINGER 0)
#   pad=B          ... each event's data padded with B bytes
#   ids=A,B,...    ... event I's id the I-th of these (URL-escaped: spaces
#                  and tabs kept), its number past them
# The default body is JSON:
#   {"path":"/p","method":"POST","execution":N,"body_length":L,"body_sha256":"hex"}
# Every counted response also carries "X-Upstream-Execution: N".
# Malformed parameters get a 400 and are not counted.
#
# Control endpoints (GET or HEAD, never counted):
#   /_count/<path>  the count for /<path>, as a bare integer
#   /_gate/NAME/I   opens gate NAME to event I (see sse=N)
#   /_health        "ok"
#
# Request bodies are read by Content-Length or chunked transfer-encoding.
# SIGTERM/SIGINT: stop accepting, terminate in-flight children, exit 0.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use Bodies;
use Digest::SHA qw(sha256_hex);
use Errno qw(EINTR EAGAIN);
use Fcntl qw(:flock O_RDWR O_CREAT O_RDONLY);
use File::Path qw(make_path remove_tree);
use File::Temp qw(tempdir);
use Getopt::Long qw(GetOptions);
use IO::Select;
use IO::Socket::INET;
use POSIX qw(WNOHANG _exit);
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time sleep);

# Bounds on everything a request can ask for.
use constant {
    MAX_CHILDREN     => 256,
    MAX_HEADER_BYTES => 64 * 1024,
    MAX_BODY_BYTES   => 64 * 1024 * 1024,
    MAX_SIZE         => 64 * 1024 * 1024,
    MAX_SLEEP        => 300,
    MAX_TRICKLE      => 60,
    MAX_COOKIES      => 1000,
    MAX_HEADERS      => 50,
    READ_TIMEOUT     => 30,     # seconds of silence tolerated while reading
    PIECES           => 4,      # chunks / trickle pieces
};

my %REASON = (
    200 => 'OK', 201 => 'Created', 202 => 'Accepted', 204 => 'No Content',
    301 => 'Moved Permanently', 302 => 'Found', 304 => 'Not Modified',
    400 => 'Bad Request', 401 => 'Unauthorized', 403 => 'Forbidden',
    404 => 'Not Found', 405 => 'Method Not Allowed', 408 => 'Request Timeout',
    409 => 'Conflict', 413 => 'Content Too Large', 422 => 'Unprocessable Content',
    429 => 'Too Many Requests', 500 => 'Internal Server Error',
    502 => 'Bad Gateway', 503 => 'Service Unavailable', 504 => 'Gateway Timeout',
);

# ---------------------------------------------------------------- options

my ($listen, $state_dir, $pid_file);
GetOptions(
    'listen=s'    => \$listen,
    'state-dir=s' => \$state_dir,
    'pid-file=s'  => \$pid_file,
) or usage();
usage() unless defined $listen;

my ($host, $port) = $listen =~ /^([^:]+):(\d+)$/ or usage();
die "upstream.pl: refusing to bind non-loopback address '$host'\n"
    unless $host =~ /^127\.\d+\.\d+\.\d+$/ || $host eq 'localhost';
$host = '127.0.0.1' if $host eq 'localhost';

my $own_state_dir = 0;
if (!defined $state_dir) {
    $state_dir = tempdir('upstream-state-XXXXXX', TMPDIR => 1);
    $own_state_dir = 1;
}
my $count_dir = "$state_dir/counts";
make_path($count_dir);

sub usage {
    die "usage: $0 --listen 127.0.0.1:PORT [--state-dir DIR] [--pid-file F]\n";
}

# ---------------------------------------------------------------- server

$| = 1;
my $server = IO::Socket::INET->new(
    LocalAddr => $host,
    LocalPort => $port,
    Proto     => 'tcp',
    Listen    => 128,
    ReuseAddr => 1,
) or die "upstream.pl: cannot listen on $host:$port: $!\n";
my $parent_pid = $$;

if (defined $pid_file) {
    open my $fh, '>', $pid_file or die "upstream.pl: $pid_file: $!\n";
    print $fh "$$\n";
    close $fh;
}

my $stop = 0;
$SIG{TERM} = $SIG{INT} = sub { $stop = 1 };
$SIG{PIPE} = 'IGNORE';

print "upstream listening on $host:", $server->sockport, "\n";

my %children;
my $select = IO::Select->new($server);
until ($stop) {
    reap();
    while (keys %children >= MAX_CHILDREN && !$stop) {
        sleep 0.05;
        reap();
    }
    last if $stop;
    next unless $select->can_read(0.5);
    my $client = $server->accept or next;   # EINTR etc.: just loop
    my $pid = fork;
    if (!defined $pid) {
        warn "upstream.pl: fork failed: $!\n";
        close $client;
        sleep 0.1;
        next;
    }
    if ($pid == 0) {
        $SIG{TERM} = $SIG{INT} = 'DEFAULT';
        close $server;
        my $ok = eval { handle($client); 1 };
        warn "upstream.pl: $@" if !$ok && $@ !~ /^(?:closed|timeout)\n/;
        close $client;
        _exit(0);    # skip END blocks and the parent's temp-dir cleanup
    }
    $children{$pid} = 1;
    close $client;
}

# Shutdown: terminate in-flight children (ours, by pid), bounded wait.
close $server;
kill 'TERM', keys %children if %children;
my $deadline = time + 3;
while (%children && time < $deadline) { reap(); sleep 0.05 if %children }
kill 'KILL', keys %children if %children;
reap();
unlink $pid_file if defined $pid_file;
remove_tree($state_dir) if $own_state_dir;
exit 0;

sub reap {
    while ((my $pid = waitpid(-1, WNOHANG)) > 0) { delete $children{$pid} }
}

# ---------------------------------------------------------------- request

# Reads more bytes from $sock into $$buf; dies "closed" on EOF, "timeout"
# after READ_TIMEOUT seconds of silence.
sub fill {
    my ($sock, $buf) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = time + READ_TIMEOUT;
    while (1) {
        my $left = $deadline - time;
        die "timeout\n" if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        return $n if $n;
        die "closed\n" if defined $n;
        next if $! == EINTR || $! == EAGAIN;
        die "closed\n";
    }
}

# Takes exactly $n bytes off the front of $$buf, reading as needed.
sub take {
    my ($sock, $buf, $n) = @_;
    fill($sock, $buf) while length $$buf < $n;
    return substr($$buf, 0, $n, '');
}

# Takes one CRLF- (or LF-) terminated line off the front of $$buf.
sub take_line {
    my ($sock, $buf) = @_;
    while (index($$buf, "\n") < 0) {
        die "bad request: line too long\n" if length $$buf > MAX_HEADER_BYTES;
        fill($sock, $buf);
    }
    my $line = substr($$buf, 0, index($$buf, "\n") + 1, '');
    $line =~ s/\r?\n\z//;
    return $line;
}

sub read_request {
    my ($sock) = @_;
    my $buf = '';
    while ($buf !~ /\r?\n\r?\n/) {
        die "bad request: header too large\n" if length $buf > MAX_HEADER_BYTES;
        fill($sock, \$buf);
    }
    my ($head) = $buf =~ /\A(.*?)\r?\n\r?\n/s;
    substr($buf, 0, $+[0], '');
    my ($request_line, @lines) = split /\r?\n/, $head;
    my ($method, $target, $version) = split / /, $request_line // '';
    die "bad request: request line\n"
        unless defined $version && $version =~ m{^HTTP/1\.[01]$} && $target =~ m{^/};

    my %headers;
    for my $line (@lines) {
        my ($name, $value) = $line =~ /^([^:\s]+):\s*(.*?)\s*$/
            or die "bad request: header line\n";
        $name = lc $name;
        $headers{$name} = exists $headers{$name} ? "$headers{$name}, $value" : $value;
    }

    my $body = '';
    my $te = lc($headers{'transfer-encoding'} // '');
    my $cl = $headers{'content-length'};
    my $expects_body = $te =~ /chunked/ || (defined $cl && $cl ne '0');
    if ($expects_body && lc($headers{expect} // '') eq '100-continue') {
        write_all($sock, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    if ($te =~ /chunked/) {
        for (my $guard = 0; ; $guard++) {
            die "bad request: too many chunks\n" if $guard > 1_000_000;
            my $size_line = take_line($sock, \$buf);
            my ($hex) = $size_line =~ /^\s*([0-9a-fA-F]+)/
                or die "bad request: chunk size\n";
            die "bad request: chunk too large\n" if length $hex > 8;
            my $size = hex $hex;
            last if $size == 0;
            die "too large\n" if length($body) + $size > MAX_BODY_BYTES;
            $body .= take($sock, \$buf, $size);
            take_line($sock, \$buf);    # CRLF after the chunk data
        }
        for (1 .. 100) {                # trailers, up to the empty line
            last if take_line($sock, \$buf) eq '';
        }
    } elsif (defined $cl) {
        die "bad request: content-length\n" unless $cl =~ /^\d{1,12}$/;
        die "too large\n" if $cl > MAX_BODY_BYTES;
        $body = take($sock, \$buf, $cl);
    }

    my ($path, $query) = $target =~ /^([^?]*)(?:\?(.*))?$/s;
    return {
        method => $method, target => $target, path => $path,
        query => $query, headers => \%headers, body => $body,
    };
}

sub uri_unescape {
    my ($s) = @_;
    $s =~ tr/+/ /;
    $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    return $s;
}

# Parses and validates the query; dies "bad request: ..." on bad values.
sub parse_params {
    my ($query) = @_;
    my %p = (status => 201, sleep => 0, trickle => 0, cookies => 0,
             chunked => 0, binary => 0, reset => 0, headers => [], echo => []);
    for my $pair (split /[&;]/, $query // '') {
        next if $pair eq '';
        my ($k, $v) = map { uri_unescape($_) } split /=/, $pair, 2;
        $v //= '';
        if ($k eq 'status') {
            die "bad request: status\n" unless $v =~ /^\d{3}$/ && $v >= 100;
            $p{status} = $v;
        } elsif ($k eq 'sleep' || $k eq 'trickle') {
            die "bad request: $k\n" unless $v =~ /^\d+(?:\.\d+)?$|^\.\d+$/;
            die "bad request: $k too large\n"
                if $v > ($k eq 'sleep' ? MAX_SLEEP : MAX_TRICKLE);
            $p{$k} = $v;
        } elsif ($k eq 'size' || $k eq 'cookies') {
            die "bad request: $k\n" unless $v =~ /^\d{1,9}$/;
            die "bad request: $k too large\n"
                if $v > ($k eq 'size' ? MAX_SIZE : MAX_COOKIES);
            $p{$k} = $v;
        } elsif ($k eq 'sse' || $k eq 'die_after' || $k eq 'pad') {
            die "bad request: $k\n" unless $v =~ /^\d{1,6}$/;
            $p{$k} = $v;
        } elsif ($k eq 'ids') {
            die "bad request: ids\n" unless $v =~ /^[^\r\n\0]{0,1024}$/;
            $p{ids} = [split /,/, $v, -1];
        } elsif ($k eq 'gap') {
            die "bad request: $k\n" unless $v =~ /^\d+(?:\.\d+)?$|^\.\d+$/ && $v <= MAX_TRICKLE;
            $p{$k} = $v;
        } elsif ($k eq 'gate') {
            die "bad request: $k\n" unless $v =~ /^[A-Za-z0-9_-]{1,64}$/;
            $p{$k} = $v;
        } elsif ($k eq 'kind') {
            die "bad request: kind\n" unless grep { $_ eq $v } Bodies::kinds();
            $p{$k} = $v;
        } elsif ($k eq 'binary' || $k eq 'chunked' || $k eq 'reset') {
            $p{$k} = ($v eq '' || $v eq '1' || lc $v eq 'true') ? 1 : 0;
        } elsif ($k eq 'echo') {
            die "bad request: echo\n" unless $v =~ /^[A-Za-z0-9-]{1,64}$/;
            die "bad request: too many headers\n" if @{ $p{echo} } >= MAX_HEADERS;
            push @{ $p{echo} }, $v;
        } elsif ($k eq 'header' || $k eq 'raw_header') {
            my $name_re = $k eq 'header' ? qr/[!#\$%&'*+.^_`|~0-9A-Za-z-]+/ : qr/[\x21-\x39\x3b-\x7e]+/;
            my ($name, $value) = $v =~ /^($name_re):\s*([^\r\n\0]*)$/
                or die "bad request: $k\n";
            die "bad request: too many headers\n" if @{ $p{headers} } >= MAX_HEADERS;
            push @{ $p{headers} }, [$name, $value];
        }
        # unknown parameters are ignored
    }
    return \%p;
}

# ------------------------------------------------------------ event streams

sub gate_file { return "$state_dir/gate-$_[0]" }

sub open_gate {
    my ($name, $to) = @_;
    my $file = gate_file($name);
    open my $fh, '>', "$file.tmp" or die "upstream.pl: $file: $!\n";
    print {$fh} "$to\n";
    close $fh;
    rename "$file.tmp", $file or die "upstream.pl: $file: $!\n";
}

sub gate_open_to {
    my ($name) = @_;
    open my $fh, '<', gate_file($name) or return 0;
    my $v = <$fh> // 0;
    chomp $v;
    return $v =~ /^\d+$/ ? $v : 0;
}

# Waits (at most 60 s) until gate $name is open to $i.
sub await_gate {
    my ($name, $i) = @_;
    my $until = time + 60;
    while (gate_open_to($name) < $i) {
        die "timeout\n" if time > $until;
        sleep 0.002;
    }
}

# sse=N: the events one chunk each, paced by a gate or a gap; die_after=K
# resets the connection after event K.
sub event_stream {
    my ($sock, $p, $n) = @_;
    my $count = $p->{sse};
    alarm(0);
    write_all($sock, "HTTP/1.1 $p->{status} " . ($REASON{$p->{status}} // 'Status') . "\r\n"
        . "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        . join('', map { "$_->[0]: $_->[1]\r\n" } grep { lc $_->[0] ne 'content-type' } @{ $p->{headers} })
        . "Transfer-Encoding: chunked\r\nX-Upstream-Execution: $n\r\nConnection: close\r\n\r\n");
    my $pad = 'p' x ($p->{pad} // 0);
    for my $i (1 .. $count) {
        if ($i > 1 && defined $p->{gate}) {
            await_gate($p->{gate}, $i);
        } elsif ($i > 1 && $p->{gap}) {
            sleep $p->{gap};
        }
        my $id = $p->{ids} && $i <= @{ $p->{ids} } ? $p->{ids}[$i - 1] : $i;
        my $event = "id: $id\ndata: event $i of $count$pad\n\n";
        write_all($sock, sprintf("%x\r\n", length $event) . $event . "\r\n");
        if (defined $p->{die_after} && $p->{die_after} == $i) {
            sleep 0.1;    # let the event leave before the reset discards it
            setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
            close $sock;
            return;
        }
    }
    write_all($sock, "0\r\n\r\n");
    shutdown($sock, 1);
}

# ---------------------------------------------------------------- counters

sub count_file {
    my ($path) = @_;
    (my $name = $path) =~ s/([^A-Za-z0-9._-])/sprintf '%%%02X', ord $1/ge;
    $name = 'sha256-' . sha256_hex($path) if length $name > 200;
    return "$count_dir/$name";
}

sub increment_count {
    my ($path) = @_;
    my $file = count_file($path);
    sysopen my $fh, $file, O_RDWR | O_CREAT or die "upstream.pl: $file: $!\n";
    flock $fh, LOCK_EX or die "upstream.pl: flock $file: $!\n";
    my $n = (<$fh> // 0) + 1;
    seek $fh, 0, 0;
    truncate $fh, 0;
    print {$fh} "$n\n";
    close $fh;    # flushes, then releases the lock
    return $n;
}

sub read_count {
    my ($path) = @_;
    my $file = count_file($path);
    sysopen my $fh, $file, O_RDONLY or return 0;
    flock $fh, LOCK_SH;
    my $n = <$fh> // 0;
    close $fh;
    chomp $n;
    return $n + 0;
}

# ---------------------------------------------------------------- response

sub write_all {
    my ($sock, $data) = @_;
    my $off = 0;
    while ($off < length $data) {
        my $n = syswrite($sock, $data, length($data) - $off, $off);
        if (!defined $n) {
            next if $! == EINTR || $! == EAGAIN;
            die "closed\n";
        }
        $off += $n;
    }
}

sub json_string {
    my ($s) = @_;
    $s =~ s/(["\\])/\\$1/g;
    $s =~ s/([\x00-\x1f\x7f-\xff])/sprintf '\\u%04x', ord $1/ge;
    return qq("$s");
}

# Splits $data into at most PIECES non-empty pieces of near-equal size.
sub split_pieces {
    my ($data) = @_;
    return () if $data eq '';
    my $step = int((length($data) + PIECES - 1) / PIECES);
    my @pieces;
    for (my $off = 0; $off < length $data; $off += $step) {
        push @pieces, substr($data, $off, $step);
    }
    return @pieces;
}

sub simple_response {
    my ($sock, $status, $body, $method) = @_;
    my $head = "HTTP/1.1 $status " . ($REASON{$status} // 'Status') . "\r\n"
        . "Content-Type: text/plain\r\n"
        . "Content-Length: " . length($body) . "\r\n"
        . "Connection: close\r\n\r\n";
    write_all($sock, $head . ($method eq 'HEAD' ? '' : $body));
}

sub handle {
    my ($sock) = @_;
    $SIG{ALRM} = 'DEFAULT';
    alarm(READ_TIMEOUT * 2);    # safety net for the whole request read

    my $req = eval { read_request($sock) };
    if (!$req) {
        my $err = $@;
        die $err if $err =~ /^(?:closed|timeout)\n/;
        if ($err =~ /^too large\n/) {
            simple_response($sock, 413, "body too large\n", 'POST');
            return;
        }
        if ($err =~ /^bad request: (.*)/) {
            simple_response($sock, 400, "bad request: $1\n", 'POST');
            return;
        }
        die $err;
    }
    my ($method, $path) = @$req{qw(method path)};

    # Control endpoints: never counted.
    if ($path =~ m{^/_gate/([A-Za-z0-9_-]{1,64})/(\d{1,9})$}) {
        open_gate($1, $2);
        simple_response($sock, 200, "open to $2\n", $method);
        return;
    }
    if ($path eq '/_health' || $path =~ m{^/_count(/.*)$}s) {
        my $what = $1;
        if ($method ne 'GET' && $method ne 'HEAD') {
            simple_response($sock, 405, "control endpoints take GET\n", $method);
        } elsif (defined $what) {
            simple_response($sock, 200, read_count($what), $method);
        } else {
            simple_response($sock, 200, 'ok', $method);
        }
        return;
    }

    my $p = eval { parse_params($req->{query}) };
    if (!$p) {
        (my $msg = $@) =~ s/\n\z//;
        simple_response($sock, 400, "$msg\n", $method);
        return;
    }

    # The execution: count it and log it before any delay.
    my $n = increment_count($path);
    my $shown = $path . (defined $req->{query} ? "?$req->{query}" : '');
    syswrite STDOUT, "execution $n $method $shown body=" . length($req->{body}) . "\n";

    alarm(int($p->{sleep} + PIECES * $p->{trickle}) + READ_TIMEOUT * 2);
    sleep $p->{sleep} if $p->{sleep} > 0;
    return event_stream($sock, $p, $n) if $p->{sse};

    # Body and its type.
    my ($body, $type);
    if ($p->{kind}) {
        ($body, $type) = Bodies::body($p->{kind}, $p->{size});
    } elsif ($p->{binary}) {
        my $len = $p->{size} // 256;
        my $block = join '', map { chr } 0 .. 255;
        $body = substr($block x (int($len / 256) + 1), 0, $len);
        $type = 'application/octet-stream';
    } elsif (defined $p->{size}) {
        my $block = join('', 'a' .. 'z', 'A' .. 'Z', '0' .. '9') . "\n";
        $body = substr($block x (int($p->{size} / length $block) + 1), 0, $p->{size});
        $type = 'text/plain';
    } else {
        $body = '{"path":' . json_string($path)
            . ',"method":' . json_string($method)
            . ',"execution":' . $n
            . ',"body_length":' . length($req->{body})
            . ',"body_sha256":"' . sha256_hex($req->{body}) . '"}';
        $type = 'application/json';
    }
    my $status = $p->{status};
    my $no_body = $status == 204 || $status == 304;
    $body = '' if $no_body;

    # Head.
    my @extra = @{ $p->{headers} };
    my $head = "HTTP/1.1 $status " . ($REASON{$status} // 'Status') . "\r\n";
    $head .= "Content-Type: $type\r\n"
        unless $no_body || grep { lc $_->[0] eq 'content-type' } @extra;
    if ($p->{chunked} && !$no_body) {
        $head .= "Transfer-Encoding: chunked\r\n";
    } elsif (!$no_body) {
        $head .= "Content-Length: " . length($body) . "\r\n";
    }
    $head .= "Set-Cookie: c$_=v$_\r\n" for 1 .. $p->{cookies};
    $head .= "$_->[0]: $_->[1]\r\n" for @extra;
    $head .= "X-Echo-$_: " . ($req->{headers}{lc $_} // '-') . "\r\n" for @{ $p->{echo} };
    $head .= "X-Upstream-Execution: $n\r\n";
    $head .= "Connection: close\r\n\r\n";

    # Body on the wire, as pieces (chunks when chunked).
    my @pieces = $method eq 'HEAD' ? () : split_pieces($body);
    if ($p->{chunked} && !$no_body && $method ne 'HEAD') {
        @pieces = map { sprintf("%x\r\n", length) . $_ . "\r\n" } @pieces;
        push @pieces, "0\r\n\r\n";
    }

    if ($p->{reset}) {
        my $wire = join '', @pieces;
        write_all($sock, $head . substr($wire, 0, int(length($wire) / 2)));
        sleep 0.1;    # let the half body leave before the reset discards it
        setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
        close $sock;
        return;
    }

    if ($p->{trickle} > 0) {
        write_all($sock, $head);
        for my $i (0 .. $#pieces) {
            if ($i > 0 && defined $p->{gate}) {
                await_gate($p->{gate}, $i + 1 > PIECES ? PIECES : $i + 1);    # the last chunk goes with the last piece
            } elsif ($i > 0) {
                sleep $p->{trickle};
            }
            write_all($sock, $pieces[$i]);
        }
    } else {
        write_all($sock, join '', $head, @pieces);
    }
    shutdown($sock, 1);
}
