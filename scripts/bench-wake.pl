#!/usr/bin/env perl
# bench-wake.pl — how late a duplicate waiting for its original
# (idempotency_wait) is answered after the original ended
# (docs/design.md#in-flight): in the original's worker, and in the other
# worker of its nginx, where the live board's settles wake it, on Redis
# and on the zone store. scripts/bench-wake.sh runs it (and puts its table
# into docs/performance.md).
#
#   scripts/bench-wake.pl [--quick] [--rounds N] [--old MODULE.so] [--out FILE] [--keep]
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
#   redis-server   --save '' --appendonly no
#   the upstream   this script itself: it holds each original's request and
#                  answers it (201, a few bytes) when the round says
#   gw             nginx with the module under test (STRESS_MODULE, default
#                  build/ngx_http_idempotency_module.so), 2 workers, a
#                  listener with reuseport (each worker its own socket);
#                  /r/ on Redis, /z/ on a zone, idempotency_wait 30s
#   gwOld          with --old, the same with that module: the figures
#                  before a change beside those after it
# A connection is kept in the worker wanted by asking it for its pid first
# (GET /pid, keep-alive), then sending the POST on it.
#
# A round: 4 keys at once, each an original, 2 duplicates in the other
# worker and 1 in the original's, sent once the original's request is held
# at the upstream; each original is answered at a time drawn between 0.1 s
# and 1.1 s after its duplicates came (so that their looks, 25 ms doubling
# up to 500 ms apart, are at any point of their schedule). A duplicate's
# delay = the time its response was complete − the time the original's
# was, both read by this one client process (CLOCK_MONOTONIC, taken as the
# last byte is read). p50, p99 and the largest, per store and place.
# The target: p99 under 5 ms in the other worker (printed, not asserted).
#
# Every loop is bounded in count and time. The table (Markdown) goes to
# stdout and to --out FILE. The exit status is non-zero only when the
# bench could not run (a process did not start, a request was not answered
# as it should have been). --quick: 8 rounds (default 25) per store and
# module. Environment: NGINX_BIN, STRESS_MODULE, TEST_REDIS_SERVER.
use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/../t/lib";

use File::Spec;
use Getopt::Long qw(GetOptions);
use IO::Select;
use IO::Socket::INET;
use List::Util qw(max);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();

binmode STDOUT, ':encoding(UTF-8)';
binmode STDERR, ':encoding(UTF-8)';
$| = 1;

my ($quick, $rounds, $old, $out, $keep) = (0, undef, undef, undef, 0);
GetOptions('quick' => \$quick, 'rounds=i' => \$rounds, 'old=s' => \$old, 'out=s' => \$out, 'keep' => \$keep)
    or die "usage: bench-wake.pl [--quick] [--rounds N] [--old MODULE.so] [--out FILE] [--keep]\n";
$rounds //= $quick ? 8 : 25;
die "bench-wake.pl: --rounds must be 1 to 200\n" unless $rounds >= 1 && $rounds <= 200;
die "bench-wake.pl: --old $old: no such file\n" if defined $old && !-f $old;

use constant { KEYS => 4, OTHER => 2, SAME => 1, RELEASE_FROM => 0.1, RELEASE_SPAN => 1.0, ROUND_LIMIT => 20,
               TARGET_MS => 5 };

sub now { clock_gettime(CLOCK_MONOTONIC) }
my $T0 = now();
sub note { printf STDERR "  [%6.1fs] %s\n", now() - $T0, join '', @_ }

# ------------------------------------------------------------------ processes

Idem::Proc::init(prefix => 'idempotency-bench-wake');
Idem::Proc::keep(1) if $keep;
Idem::Redis::start_redis();
my $redis_port = Idem::Redis::redis_port();
my $held = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 256, Proto => 'tcp',
                                 ReuseAddr => 1) or die "bench-wake.pl: cannot listen for the upstream: $!\n";
my $held_port = $held->sockport;

sub gateway {
    my ($name, $module) = @_;
    my $loc = sub {
        my ($prefix, $store) = @_;
        return join "\n", "location $prefix {", '    idempotency on;', '    idempotency_scope "";', $store,
            '    idempotency_wait 30s;', '    add_header X-Worker $pid always;', '    proxy_read_timeout 30s;',
            "    proxy_pass http://127.0.0.1:$held_port;", '}';
    };
    return Idem::Nginx::nginx_start($name, workers => 2, ports => 1, load_module => 0,
        main => 'load_module ' . File::Spec->rel2abs($module) . ';',
        http => "access_log off;\nidempotency_redis 127.0.0.1:$redis_port;\nidempotency_zone zone=wake:4m;",
        server => sub {
            join "\n", "listen 127.0.0.1:$_[0]{ports}[0] reuseport;", 'server_name localhost;',
                'location = /pid { return 200 $pid; }', $loc->('/r/', ''), $loc->('/z/', '    idempotency_store zone=wake;');
        });
}

my @runs = ((defined $old ? ([before => 'gwOld', $old]) : ()), [after => 'gw', Idem::Nginx::module_path()]);
my %gw = map { ($_->[0] => gateway($_->[1], $_->[2])) } @runs;
note("redis-server :$redis_port; the upstream :$held_port; ",
     join '; ', map { "$_->[0]: $_->[1] :$gw{ $_->[0] }{ports}[0] ($_->[2])" } @runs);

# ------------------------------------------------------------------ clients

my $RUN = sprintf 'w%d%d', time, $$;

# One response of a keep-alive connection (Content-Length framed): (status, body).
sub read_one {
    my ($sock) = @_;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), now() + 10);
    while (now() < $deadline) {
        if ($buf =~ /\A(.*?\r\n\r\n)/s) {
            my $head = $1;
            my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
            return ($head =~ m{\AHTTP/1\.\d (\d{3})}, substr($buf, length $head))
                if defined $len && length($buf) >= length($head) + $len;
        }
        $sel->can_read(max(0, $deadline - now())) or next;
        sysread($sock, $buf, 65536, length $buf) or return ();
    }
    return ();
}

# A connection to $port served by a worker $want accepts, and its pid.
sub conn_in_worker {
    my ($port, $want) = @_;
    for (1 .. 64) {
        my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 10)
            or die "bench-wake.pl: connect: $!\n";
        syswrite($sock, "GET /pid HTTP/1.1\r\nHost: localhost\r\n\r\n") or die "bench-wake.pl: send: $!\n";
        my ($status, $pid) = read_one($sock);
        die "bench-wake.pl: GET /pid was not answered\n" unless $status && $status == 200;
        return ($sock, $pid) if $want->($pid);
        close $sock;
    }
    die "bench-wake.pl: no connection reached the worker wanted in 64 tries\n";
}

sub post_on {
    my ($sock, $uri, $key) = @_;
    syswrite($sock, "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                    . "Content-Length: 1\r\n\r\nx") or die "bench-wake.pl: send: $!\n";
    $sock->blocking(0);
}

# The next request nginx sends the upstream: (its connection, its key).
sub held_request {
    IO::Select->new($held)->can_read(10) or die "bench-wake.pl: no original reached the upstream\n";
    my $c = $held->accept or die "bench-wake.pl: accept: $!\n";
    my ($buf, $sel, $deadline) = ('', IO::Select->new($c), now() + 10);
    while ($buf !~ /\r\n\r\n/ && now() < $deadline) {
        $sel->can_read(max(0, $deadline - now())) or next;
        sysread($c, $buf, 65536, length $buf) or last;
    }
    my ($key) = $buf =~ m{\APOST /[rz]/(\S+) HTTP} or die "bench-wake.pl: the upstream got no request\n";
    return ($c, $key);
}

# ------------------------------------------------------------------ rounds

my (%late, $errors);   # late{run}{store}{place} = [seconds]

sub one_round {
    my ($run, $store, $round) = @_;
    my $port = $gw{$run}{ports}[0];
    my (%k, %by_sock);
    for my $i (1 .. KEYS) {
        my $key = "$RUN-$run-$store-$round-$i";
        my ($sock, $pid) = conn_in_worker($port, sub { 1 });
        post_on($sock, "/$store/$key", $key);
        $k{$key} = { pid => $pid, original => { sock => $sock }, waiters => [] };
        $by_sock{ fileno $sock } = $k{$key}{original};
    }
    for (1 .. KEYS) {
        my ($c, $key) = held_request();
        die "bench-wake.pl: the upstream got an unknown key $key\n" unless $k{$key} && !$k{$key}{upstream};
        $k{$key}{upstream} = $c;
    }
    for my $key (sort keys %k) {
        my $pid = $k{$key}{pid};
        for my $place ((('other') x OTHER), (('same') x SAME)) {
            my ($sock) = conn_in_worker($port, $place eq 'same' ? sub { $_[0] == $pid } : sub { $_[0] != $pid });
            post_on($sock, "/$store/$key", $key);
            my $w = { sock => $sock, place => $place };
            push @{ $k{$key}{waiters} }, $w;
            $by_sock{ fileno $sock } = $w;
        }
    }
    my $start = now();
    $k{$_}{release} = $start + RELEASE_FROM + rand(RELEASE_SPAN) for keys %k;
    my $sel = IO::Select->new(map { $_->{sock} } values %by_sock);
    while ($sel->count && now() - $start < ROUND_LIMIT) {
        for my $key (grep { $k{$_}{upstream} && $k{$_}{release} <= now() } keys %k) {
            syswrite($k{$key}{upstream}, "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
                                         . "Connection: close\r\n\r\nheld\n");
            close delete $k{$key}{upstream};
        }
        my @due = map { $k{$_}{release} } grep { $k{$_}{upstream} } keys %k;
        my $wait = @due ? max(0, (sort { $a <=> $b } @due)[0] - now()) : 0.5;
        for my $s ($sel->can_read($wait < 0.5 ? $wait : 0.5)) {
            my $t = now();
            my $c = $by_sock{ fileno $s };
            my $n = sysread($s, $c->{buf}, 65536, length($c->{buf} // ''));
            next if !defined $n && ($!{EAGAIN} || $!{EINTR});
            next if $n;
            $c->{done} = $t;
            $sel->remove($s);
            close $s;
        }
    }
    for my $key (sort keys %k) {
        my $o = $k{$key}{original};
        for my $w (@{ $k{$key}{waiters} }) {
            my ($status) = ($w->{buf} // '') =~ m{\AHTTP/1\.\d (\d{3})};
            if (!$o->{done} || !$w->{done} || ($status // 0) != 201 || $w->{buf} !~ /\r\n\r\nheld\n\z/) {
                $errors++;
                note("$run $store $key: a duplicate in the $w->{place} worker got ", $status // 'no answer');
                next;
            }
            push @{ $late{$run}{$store}{ $w->{place} } }, $w->{done} - $o->{done};
        }
    }
}

for my $r (@runs) {
    for my $store (qw(r z)) {
        note("$r->[0]: ", $store eq 'r' ? 'Redis' : 'the zone', ", $rounds rounds of ", KEYS, ' keys');
        one_round($r->[0], $store, $_) for 1 .. $rounds;
    }
}

# ------------------------------------------------------------------ table

sub pct {
    my ($p, @v) = @_;
    @v = sort { $a <=> $b } @v;
    return $v[ max(0, int($p / 100 * @v + 0.999999) - 1) ];
}
sub ms { sprintf '%.1f', $_[0] * 1000 }

my @cols = map { $_->[0] } @runs;
my $table = '| store | duplicate waiting in | duplicates |'
          . join('', map { " $_ p50 ms | $_ p99 ms | $_ max ms |" } @cols) . " target p99 |\n"
          . '|---|---|---:|' . ('---:|' x (3 * @cols)) . "---|\n";
for my $store (qw(r z)) {
    for my $place (qw(other same)) {
        my $n = scalar @{ $late{ $cols[-1] }{$store}{$place} || [] };
        $table .= sprintf '| %s | %s | %d |', $store eq 'r' ? 'Redis' : 'zone',
            $place eq 'other' ? 'the other worker' : "the original's worker", $n;
        for my $c (@cols) {
            my @v = @{ $late{$c}{$store}{$place} || [] };
            $table .= @v ? sprintf(' %s | %s | %s |', ms(pct(50, @v)), ms(pct(99, @v)), ms(max(@v))) : ' — | — | — |';
        }
        $table .= $place eq 'other' ? ' < ' . TARGET_MS . " ms |\n" : " — |\n";
    }
}
my $text = $table . "\n" . sprintf("%d rounds of %d keys a store, each with %d duplicates in the other worker and %d "
    . "in the original's, the original answered at a time drawn between %.1f s and %.1f s after them; "
    . "the delay from the original's last byte to the duplicate's, read by one client.%s\n",
    $rounds, KEYS, OTHER, SAME, RELEASE_FROM, RELEASE_FROM + RELEASE_SPAN,
    defined $old ? " before: $old; after: the module under test." : '');
print "\n$text";
if (defined $out) {
    open my $fh, '>:encoding(UTF-8)', $out or die "bench-wake.pl: $out: $!\n";
    print {$fh} $text;
    close $fh;
}
Idem::Nginx::nginx_stop($gw{$_}) for keys %gw;
exit($errors ? 1 : 0);
