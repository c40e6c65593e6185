# Fenced writes (SPEC guarantees: "A response is stored only by the request
# that holds the claim"): an original whose claim was taken over while its
# upstream was still working can no longer store its response, release the
# key or renew the claim; each refusal is logged. On one Redis.
#
# On Redis the takeover is written straight into Redis: the claim is
# replaced by another gateway's claim for the same request (as if the
# original's claim had expired and that gateway had claimed the key).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

test_nginx_defaults();
run_tests();

sub connect_nginx {
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => IdempotencyTest::nginx_port(),
                                     Proto => 'tcp', Timeout => 10)
        or die "cannot connect to nginx: $!\n";
    return $sock;
}

sub post {
    my ($sock, $uri, $key) = @_;
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
                  . "Content-Length: 1\r\n\r\nx";
}

# POSTs "x" to $uri with $key on a new connection and returns it once the
# upstream has started on it.
sub in_flight {
    my ($uri, $key) = @_;
    (my $path = $uri) =~ s/\?.*//;
    my $before = IdempotencyTest::upstream_count($path);
    my $sock = connect_nginx();
    post($sock, $uri, $key);
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) > $before }, 10)
        or die "POST $uri never reached the upstream\n";
    return $sock;
}

# Reads a response to the end of the connection: {status, headers (lower-case
# names), body}.
sub read_response {
    my ($sock) = @_;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), time + 10);
    while (time < $deadline) {
        next unless $sel->can_read($deadline - time);
        my $n = sysread($sock, $buf, 65536, length $buf);
        last unless $n;
    }
    close $sock;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    return { status => 0, headers => {}, body => '' } unless defined $head && $head =~ m{\AHTTP/1\.\d (\d{3})};
    my %headers = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head;
    return { status => $1, headers => \%headers, body => $body // '' };
}

# Waits until the error log has a line with $text; true when it has.
sub logged {
    my ($text, $secs) = @_;
    return IdempotencyTest::wait_until(sub {
        open my $fh, '<', $Test::Nginx::Util::ErrLogFile or return 0;
        local $/;
        return index(<$fh> // '', $text) >= 0;
    }, $secs // 5);
}

# Replaces the claim under $rkey (on the Redis at $port) with another
# gateway's claim for the same request: the same fingerprint, another
# token, for $px ms. Returns it.
sub take_over {
    my ($port, $rkey, $px) = @_;
    my $claim = IdempotencyTest::redis_command_at($port, 'GET', $rkey);
    die "no claim under $rkey to take over\n" unless defined $claim && substr($claim, 0, 5) eq "IDM\x01\x01";
    my $token = 'another gateway';
    my $other = substr($claim, 0, 37) . chr(length $token) . $token;
    IdempotencyTest::redis_command_at($port, 'SET', $rkey, $other, 'PX', $px);
    return $other;
}

# The original's late store, on the Redis at $port: its client still gets
# the response, the other claim stays.
sub late_store {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    my $other = take_over($port, $rkey, 60000);
    my $res = read_response($original);
    Test::More::is($res->{status}, 201, "$key: the original's client gets the upstream's response");
    logged('could not store the response');
    Test::More::ok(IdempotencyTest::redis_command_at($port, 'GET', $rkey) eq $other,
                   "$key: the other gateway's claim stays, the late response is not stored");
}

# The original's late release (its upstream answers 500): the other claim stays.
sub late_release {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    my $other = take_over($port, $rkey, 60000);
    my $res = read_response($original);
    Test::More::is($res->{status}, 500, "$key: the original's client gets the upstream's 500");
    logged('could not release the key');
    Test::More::ok(IdempotencyTest::redis_command_at($port, 'GET', $rkey) eq $other,
                   "$key: the other gateway's claim is not deleted");
}

# The original's late renewal (lock_ttl 3s: every second): the other claim,
# taken for 2.5 s, still expires on its own time.
sub late_renewal {
    my ($port, $uri, $key) = @_;
    my $rkey = IdempotencyTest::redis_key($key);
    my $original = in_flight($uri, $key);
    take_over($port, $rkey, 2500);
    my $taken = time;
    sleep 1.3;  # past the original's first renewal
    my $asked = time;
    my $left = IdempotencyTest::redis_command_at($port, 'PTTL', $rkey);
    my $most = 2500 - int(($asked - $taken) * 1000) + 20;
    Test::More::ok($left > 0 && $left <= $most,
                   "$key: the other gateway's claim is not extended: ${left} ms left, at most $most");
    logged('could not renew the claim');
    read_response($original);
}

__DATA__

=== TEST 1: Redis: a late store after a takeover is refused: the other claim stays, a retry gets 409
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_store(IdempotencyTest::redis_port(), '/fence/store?sleep=1', 'fence-store');
--- request
POST /fence/store?sleep=1
x
--- more_headers
Idempotency-Key: fence-store
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not store the response: the claim had expired or was taken over


=== TEST 2: Redis: a late release after a takeover is refused: the upstream's 5xx does not free the other claim
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 10s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
main::late_release(IdempotencyTest::redis_port(), '/fence/release?status=500&sleep=1', 'fence-release');
--- request
POST /fence/release?status=500&sleep=1
x
--- more_headers
Idempotency-Key: fence-release
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
could not release the key: the claim had expired or was taken over


=== TEST 3: Redis: a late renewal after a takeover is refused: the other claim's TTL is not extended
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 3s;
    proxy_pass http://backend;
}
--- init
main::late_renewal(IdempotencyTest::redis_port(), '/fence/renew?sleep=1.5', 'fence-renew');
--- request
GET /_count/fence/renew
--- response_body: 1
--- error_log
could not renew the claim: the claim had expired or was taken over
