# Idem/TlsListener.pm — a TLS server that is not Redis, for tests of what a
# server the gateway must not trust is told: `openssl s_server` on a free
# loopback port with the given certificate, writing every byte it receives
# after a handshake (decrypted) to a file, and its own complaints (a peer
# that closed, a handshake that failed) to another. It answers nothing.
#
#     use Idem::TlsListener;
#     my $l = Idem::TlsListener->start($cert_pem, $key_pem);
#     $l->port;        # 127.0.0.1:port it listens on
#     $l->received;    # what arrived after handshakes so far (bytes)
#     $l->log;         # s_server's stderr so far
#     $l->open_connections;   # the states of its end of open connections
#
# Needs IdempotencyTest started (it borrows its free ports and watchdog).
# The server is stopped, by pid, when the test process ends.
package Idem::TlsListener;

use strict;
use warnings;

use File::Temp qw(tempdir);
use POSIX qw(_exit);
use Time::HiRes qw(time sleep);
use IdempotencyTest ();

my @listeners;

sub start {
    my ($class, $cert, $key) = @_;
    my $dir = tempdir('idem-tls-listener-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    for my $attempt (1 .. 3) {
        my $port = IdempotencyTest::free_port();
        # s_server stops at EOF on its stdin unless -quiet; a pipe held open
        # by this process keeps it from seeing one at all.
        pipe(my $stdin, my $hold) or die "Idem::TlsListener: pipe: $!\n";
        my $pid = fork // die "Idem::TlsListener: fork: $!\n";
        if ($pid == 0) {
            $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
            close $hold;
            open STDIN, '<&', $stdin or _exit(127);
            open STDOUT, '>', "$dir/received" or _exit(127);
            open STDERR, '>', "$dir/log" or _exit(127);
            exec 'openssl', 's_server', '-quiet', '-accept', "127.0.0.1:$port", '-cert', $cert, '-key', $key
                or _exit(127);
        }
        close $stdin;
        IdempotencyTest::tell_watchdog("pid $pid");
        my $self = bless { pid => $pid, port => $port, dir => $dir, hold => $hold }, $class;
        push @listeners, $self;
        my $up = IdempotencyTest::wait_until(sub {
            return 'dead' unless IdempotencyTest::alive($pid);
            return listening($port) ? 'up' : 0;
        }, 10) || 'timeout';
        return $self if $up eq 'up';
        $self->stop;
        die "Idem::TlsListener: openssl s_server did not listen on 127.0.0.1:$port\n" . $self->log
            if $up eq 'timeout';
    }
    die "Idem::TlsListener: openssl s_server could not listen on a free port\n";
}

# A socket in LISTEN state on 127.0.0.1:$port, read from /proc (connecting
# to find out would be a connection the server records).
sub listening {
    my ($port) = @_;
    open my $fh, '<', '/proc/net/tcp' or return 0;
    my $want = sprintf '0100007F:%04X', $port;
    while (my $line = <$fh>) {
        my (undef, $local, undef, $state) = split ' ', $line;
        return 1 if $local eq $want && $state eq '0A';
    }
    return 0;
}

# The states of the server's end of its connections (hex, as /proc/net/tcp
# writes them: 01 established, 08 the peer closed and the server has not yet
# read the end, ...), for the connections still open on its side.
sub open_connections {
    my ($self) = @_;
    open my $fh, '<', '/proc/net/tcp' or return ();
    my $local = sprintf '0100007F:%04X', $self->{port};
    my @states;
    while (my $line = <$fh>) {
        my (undef, $l, undef, $state) = split ' ', $line;
        push @states, $state if $l eq $local && $state ne '0A' && $state ne '06' && $state ne '07';
    }
    return @states;
}

sub port { $_[0]{port} }

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return '';
    binmode $fh;
    local $/;
    return <$fh> // '';
}

sub received { slurp("$_[0]{dir}/received") }
sub log      { slurp("$_[0]{dir}/log") }

sub stop {
    my ($self) = @_;
    IdempotencyTest::stop_pid(delete $self->{pid}) if $self->{pid};
    close delete $self->{hold} if $self->{hold};
}

END { local ($?, $!, $@); $_->stop for @listeners }

1;
