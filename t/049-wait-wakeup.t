# With idempotency_wait, a duplicate waiting in the same worker as its
# original is answered as soon as the original stores, not at its group's
# next look (docs/design.md#in-flight): the waiters look again at once,
# right behind the store. Their own looks come after a delay doubling from
# 25 ms up to 500 ms; this test measures, on both client connections, that
# the waiter's replay arrives within 150 ms of the end of the original's
# response, when the next look was 400 ms or more away.
#
# The upstream is held here, in the test: it answers the original when told
# to. On Redis (TEST 1) the original is answered right after one of the
# waiter's looks, seen as a SET in INFO commandstats, once the looks are
# 500 ms apart; the zone store's looks cannot be watched from outside, so
# there (TEST 2) the original is answered 1 s after the waiter came, half
# way between its looks at about 775 ms and 1275 ms.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use IO::Select;
use IO::Socket::INET;
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time sleep);

use constant BOUND => 0.150;    # seconds; the looks are up to 0.5 s apart

our $held = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp',
                                  ReuseAddr => 1) or die "cannot listen for the held upstream: $!\n";
$ENV{TEST_NGINX_HELD_PORT} = $held->sockport;

test_nginx_defaults();
run_tests();

sub post {
    my ($uri, $key) = @_;
    return send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx");
}

# The upstream connection nginx opened for the original, its request read.
sub upstream_request {
    IO::Select->new($held)->can_read(10) or die "the original never reached the held upstream\n";
    my $c = $held->accept or die "accept: $!\n";
    my ($buf, $sel, $deadline) = ('', IO::Select->new($c), time + 10);
    while ($buf !~ /\r\n\r\n/ && time < $deadline) {
        $sel->can_read($deadline - time) or next;
        sysread($c, $buf, 65536, length $buf) or last;
    }
    die "the held upstream got no request\n" unless $buf =~ m{\APOST }s;
    return $c;
}

sub set_calls {
    my ($n) = redis_command('INFO', 'commandstats') =~ /^cmdstat_set:calls=(\d+)/m;
    return $n // 0;
}

# Reads both responses to their end; returns ({status, headers, body, done}
# of each): done is when the response was complete.
sub read_both {
    my (@socks) = @_;
    my %at = map { (fileno($_) => { sock => $_, buf => '' }) } @socks;
    my $sel = IO::Select->new(@socks);
    my $deadline = time + 10;
    while ($sel->count && time < $deadline) {
        for my $s ($sel->can_read($deadline - time)) {
            my $st = $at{ fileno $s };
            my $n = sysread($s, $st->{buf}, 65536, length $st->{buf});
            next if !defined $n && $!{EINTR};
            next if $n;
            $st->{done} = time;
            $sel->remove($s);
        }
    }
    return map {
        my $st = $at{ fileno $_ };
        my ($head, $body) = split /\r\n\r\n/, $st->{buf}, 2;
        my ($status) = ($head // '') =~ m{\AHTTP/1\.\d (\d{3})};
        my %h = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head // '';
        close $_;
        { status => $status // 0, headers => \%h, body => $body // '', done => $st->{done} // 0 };
    } @socks;
}

# The original is held at the upstream while a duplicate waits; $release
# says when to answer it (called with the time the duplicate was sent and
# the SETs Redis had run before it).
sub waiter_woken {
    my ($uri, $key, $release) = @_;
    my $original = post($uri, $key);
    my $upstream = upstream_request();
    my $sets = set_calls();    # the original's claim is counted
    my $waiter = post($uri, $key);
    $release->(time, $sets);
    syswrite($upstream, "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
                        . "Connection: close\r\n\r\nheld\n") or die "cannot answer the original: $!\n";
    close $upstream;
    my ($o, $w) = read_both($original, $waiter);
    Test::More::is($o->{status}, 201, "$key: the original gets the upstream's response");
    Test::More::is($w->{status}, 201, "$key: the waiter gets ...");
    Test::More::is($w->{headers}{'idempotent-replayed'}, 'true', "$key: ... the replay");
    Test::More::is($w->{body}, "held\n", "$key: ... of the original's body");
    my $late = $w->{done} - $o->{done};
    Test::More::ok($o->{done} && $w->{done} && $late < BOUND,
                   sprintf("%s: the waiter is answered %.0f ms after the original (bound %.0f ms)",
                           $key, $late * 1000, BOUND * 1000));
}

# Redis: right after the waiter's fifth look (its own claim and five looks:
# six SETs, about 775 ms in); the next would come 500 ms later.
sub on_redis {
    my ($uri, $key) = @_;
    waiter_woken($uri, $key, sub {
        my (undef, $sets) = @_;
        my $deadline = time + 10;
        sleep 0.002 while set_calls() < $sets + 6 && time < $deadline;
        die "$key: the waiter did not look again\n" if time >= $deadline;
    });
}

# The zone: 1 s after the waiter came.
sub on_zone {
    my ($uri, $key) = @_;
    waiter_woken($uri, $key, sub {
        my ($sent) = @_;
        sleep 1 - (time - $sent) if time - $sent < 1;    # the looks run on a schedule: a time is the condition
    });
}

__DATA__

=== TEST 1: Redis: a waiter in the original's worker is answered as soon as the original stores
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /held/ {
    idempotency on;
    idempotency_wait 10s;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::on_redis('/held/redis', 'wake-redis');
--- request
POST /held/redis
x
--- more_headers
Idempotency-Key: wake-redis
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held


=== TEST 2: zone: a waiter in the original's worker is answered as soon as the original stores
--- http_config
idempotency_zone zone=idem:1m;
--- config
location /held/ {
    idempotency on;
    idempotency_store zone=idem;
    idempotency_wait 10s;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::on_zone('/held/zone', 'wake-zone');
--- request
POST /held/zone
x
--- more_headers
Idempotency-Key: wake-zone
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held
