# With idempotency_wait, a duplicate waiting for its original is answered
# as soon as the original settles — its response stored, marked
# unreplayable, or its key released —, not at its group's next look
# (docs/design.md#in-flight): in the original's worker the waiters look
# again at once, right behind the settle; in the other worker of the same
# nginx the live board tells them within a millisecond of the store having
# it. Their own looks come after a delay doubling from 25 ms up to 500 ms;
# this test measures, on the client connections, that the waiter is
# answered within 150 ms of the end of the original's response, when its
# next look was 400 ms or more away. Two workers; a second listener with
# reuseport, each worker with its own socket, and a connection kept in the
# worker the test wants by asking it for its pid first (GET /pid).
#
# The upstream is held here, in the test: it answers the original when told
# to. On Redis the original is answered right after one of the waiter's
# looks, seen as a SET in INFO commandstats, once the looks are 500 ms
# apart; the zone store's looks cannot be watched from outside, so there
# the original is answered 1 s after the waiter came, half way between its
# looks at about 775 ms and 1275 ms. A released original's waiter becomes
# the new original: it is timed by when its request reaches the upstream.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use IO::Select;
use IO::Socket::INET;
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time sleep);

use constant BOUND => 0.150;    # seconds; the looks are up to 0.5 s apart

master_on();
workers(2);

our $held = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp',
                                  ReuseAddr => 1) or die "cannot listen for the held upstream: $!\n";
$ENV{TEST_NGINX_HELD_PORT} = $held->sockport;
$ENV{TEST_NGINX_SPREAD_PORT} = IdempotencyTest::free_port();

test_nginx_defaults();
run_tests();

# Reads one response of a keep-alive connection (Content-Length framed):
# (status, body), or () when none came within 10 s.
sub read_one {
    my ($sock) = @_;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), time + 10);
    while (time < $deadline) {
        if ($buf =~ /\A(.*?\r\n\r\n)/s) {
            my $head = $1;
            my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
            return ($head =~ m{\AHTTP/1\.\d (\d{3})}, substr($buf, length $head))
                if defined $len && length($buf) >= length($head) + $len;
        }
        $sel->can_read($deadline - time) or next;
        sysread($sock, $buf, 65536, length $buf) or return ();
    }
    return ();
}

# A connection to the reuseport listener served by a worker that $want
# accepts (given its pid), and that pid: new connections until one is (at
# most 64; the kernel spreads them by their ports).
sub conn_in_worker {
    my ($want) = @_;
    for (1 .. 64) {
        my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ENV{TEST_NGINX_SPREAD_PORT},
                                         Proto => 'tcp', Timeout => 10) or die "cannot connect to nginx: $!\n";
        $sock->autoflush(1);
        print {$sock} "GET /pid HTTP/1.1\r\nHost: localhost\r\n\r\n";
        my ($status, $pid) = read_one($sock);
        die "GET /pid: no answer\n" unless $status && $status == 200;
        return ($sock, $pid) if $want->($pid);
        close $sock;
    }
    die "no connection reached the worker wanted in 64 tries\n";
}

sub post_on {
    my ($sock, $uri, $key) = @_;
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                  . "Content-Length: 1\r\n\r\nx" or die "cannot send the request: $!\n";
}

# The next upstream connection nginx opens, its request read; and when it
# was accepted.
sub upstream_request {
    IO::Select->new($held)->can_read(10) or die "no request reached the held upstream\n";
    my $c = $held->accept or die "accept: $!\n";
    my $at = time;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($c), time + 10);
    while ($buf !~ /\r\n\r\n/ && time < $deadline) {
        $sel->can_read($deadline - time) or next;
        sysread($c, $buf, 65536, length $buf) or last;
    }
    die "the held upstream got no request\n" unless $buf =~ m{\APOST }s;
    return ($c, $at);
}

sub answer_upstream {
    my ($c, $status, $body) = @_;
    syswrite($c, "HTTP/1.1 $status Held\r\nContent-Type: text/plain\r\nContent-Length: " . length($body)
                 . "\r\nConnection: close\r\n\r\n$body") or die "cannot answer from the upstream: $!\n";
    close $c;
}

sub set_calls {
    my ($n) = redis_command('INFO', 'commandstats') =~ /^cmdstat_set:calls=(\d+)/m;
    return $n // 0;
}

# Reads the responses to their end; returns ({status, headers, body, done}
# of each): done is when the response was complete.
sub read_all {
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

# The original is held at the upstream while a duplicate waits in the
# original's worker (where => 'same') or the other one ('other'); the
# store's schedule (on => 'redis' or 'zone') says when the original is
# answered, with `status` (201 by default). `then` says what the waiter
# gets: 'replay' (201 and the original's body), 'gone' (410), or 'runs'
# (it becomes the original: its own request reaches the upstream, timed
# there, and is answered 201 "again\n").
sub waiter_woken {
    my (%o) = @_;
    my ($uri, $key) = @o{qw(uri key)};
    my ($original, $pid) = conn_in_worker(sub { 1 });
    post_on($original, $uri, $key);
    my ($upstream) = upstream_request();
    my $sets = set_calls();    # the original's claim is counted
    my ($waiter, $wpid) = conn_in_worker($o{where} eq 'same' ? sub { $_[0] == $pid } : sub { $_[0] != $pid });
    post_on($waiter, $uri, $key);
    my $sent = time;
    if ($o{on} eq 'redis') {
        # right after the waiter's fifth look (its own claim and five
        # looks: six SETs, about 775 ms in); the next would come 500 ms later
        my $deadline = time + 10;
        sleep 0.002 while set_calls() < $sets + 6 && time < $deadline;
        die "$key: the waiter did not look again\n" if time >= $deadline;
    } else {
        sleep 1 - (time - $sent) if time - $sent < 1;    # the looks run on a schedule: a time is the condition
    }
    answer_upstream($upstream, $o{status} // 201, "held\n");
    my ($o_res, $w_res, $late);
    if ($o{then} eq 'runs') {
        ($o_res) = read_all($original);
        my ($again, $at) = upstream_request();
        $late = $at - $o_res->{done};
        answer_upstream($again, 201, "again\n");
        ($w_res) = read_all($waiter);
        Test::More::is($w_res->{status}, 201, "$key: the waiter, now the original, gets ...");
        Test::More::is($w_res->{body}, "again\n", "$key: ... the upstream's new response");
    } else {
        ($o_res, $w_res) = read_all($original, $waiter);
        $late = $w_res->{done} - $o_res->{done};
        if ($o{then} eq 'replay') {
            Test::More::is($w_res->{status}, 201, "$key: the waiter gets ...");
            Test::More::is($w_res->{headers}{'idempotent-replayed'}, 'true', "$key: ... the replay");
            Test::More::is($w_res->{body}, "held\n", "$key: ... of the original's body");
        } else {
            Test::More::is($w_res->{status}, 410, "$key: the waiter gets 410");
        }
    }
    Test::More::is($o_res->{status}, $o{status} // 201, "$key: the original gets the upstream's response");
    Test::More::is($w_res->{headers}{'x-worker'}, $wpid, "$key: the waiter was answered by worker $wpid");
    Test::More::ok(($o{where} eq 'same') == ($wpid == $pid), "$key: ... the original's worker: $o{where}");
    Test::More::ok($o_res->{done} && $w_res->{done} && $late < BOUND,
                   sprintf("%s: the waiter is answered %.0f ms after the original (bound %.0f ms)",
                           $key, $late * 1000, BOUND * 1000));
}

__DATA__

=== TEST 1: Redis: a waiter in the original's worker is answered as soon as the original stores
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/redis-1', key => 'wake-redis-1', where => 'same', on => 'redis', then => 'replay');
--- request
POST /held/redis-1
x
--- more_headers
Idempotency-Key: wake-redis-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held


=== TEST 2: Redis: a waiter in the other worker is answered as soon as the original stores (the live board)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/redis-2', key => 'wake-redis-2', where => 'other', on => 'redis', then => 'replay');
--- request
POST /held/redis-2
x
--- more_headers
Idempotency-Key: wake-redis-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held


=== TEST 3: Redis: a waiter in the other worker gets 410 as soon as the original is marked unreplayable
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_wait 10s;
        idempotency_max_response_size 4;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/redis-3', key => 'wake-redis-3', where => 'other', on => 'redis', then => 'gone');
--- request
POST /held/redis-3
x
--- more_headers
Idempotency-Key: wake-redis-3
--- error_code: 410


=== TEST 4: Redis: a waiter in the other worker runs as soon as the original's key is released (503)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/redis-4', key => 'wake-redis-4', where => 'other', on => 'redis', status => 503,
                   then => 'runs');
--- request
POST /held/redis-4
x
--- more_headers
Idempotency-Key: wake-redis-4
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
again


=== TEST 5: zone: a waiter in the original's worker is answered as soon as the original stores
--- http_config
idempotency_zone zone=idem:1m;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_store zone=idem;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    idempotency_store zone=idem;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/zone-5', key => 'wake-zone-5', where => 'same', on => 'zone', then => 'replay');
--- request
POST /held/zone-5
x
--- more_headers
Idempotency-Key: wake-zone-5
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held


=== TEST 6: zone: a waiter in the other worker is answered as soon as the original stores (the live board)
--- http_config
idempotency_zone zone=idem:1m;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_store zone=idem;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    idempotency_store zone=idem;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/zone-6', key => 'wake-zone-6', where => 'other', on => 'zone', then => 'replay');
--- request
POST /held/zone-6
x
--- more_headers
Idempotency-Key: wake-zone-6
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
held


=== TEST 7: zone: a waiter in the other worker runs as soon as the original's key is released (503)
--- http_config
idempotency_zone zone=idem:1m;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    server_name localhost;
    location = /pid { return 200 $pid; }
    location /held/ {
        idempotency on;
        idempotency_store zone=idem;
        idempotency_wait 10s;
        add_header X-Worker $pid always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
    }
}
--- config
location /held/ {
    idempotency on;
    idempotency_store zone=idem;
    proxy_pass http://127.0.0.1:$TEST_NGINX_HELD_PORT;
}
--- init
main::waiter_woken(uri => '/held/zone-7', key => 'wake-zone-7', where => 'other', on => 'zone', status => 503,
                   then => 'runs');
--- request
POST /held/zone-7
x
--- more_headers
Idempotency-Key: wake-zone-7
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body
again
