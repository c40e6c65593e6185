# A response nginx parked in a temporary file (proxy_buffering on, larger
# than its buffers) is captured from that file and stored whole
# (docs/design.md#first-execution, docs/design.md#client-leaves): here the
# upstream answers 1 MB in full and closes while the client has read
# nothing (through a server block whose sockets have a small send
# buffer), so most of it waits in the temporary file; then the client
# resets the connection (TEST 1) or reads the whole response (TEST 2).
# Each time the response is stored whole, and the retry (to the default
# server block, of the same name: the same key space) gets the replay byte
# for byte; one execution.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Socket qw(AF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF SO_LINGER inet_aton pack_sockaddr_in);
use Test::Nginx::Socket 'no_plan';


# True while a connection to the upstream is open on nginx's side.
sub upstream_connected {
    open my $fh, '<', '/proc/net/tcp' or die "/proc/net/tcp: $!\n";
    my $remote = sprintf '0100007F:%04X', upstream_port();
    while (my $line = <$fh>) {
        my (undef, undef, $rem, $state) = split ' ', $line;
        return 1 if $rem eq $remote && ($state eq '01' || $state eq '08');
    }
    return 0;
}

# POSTs with the key from a socket with a small receive buffer, reads
# nothing until the upstream exchange is over (the response is in nginx's
# buffers and its temporary file), then resets the connection ('reset') or
# reads the whole response ('read'). Checks that the response is stored
# whole.
sub parked {
    my ($uri, $key, $then) = @_;
    socket(my $sock, AF_INET, SOCK_STREAM, 0) or die "socket: $!\n";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 4096) or die "setsockopt: $!\n";
    connect($sock, pack_sockaddr_in($ENV{TEST_NGINX_SMALL_PORT}, inet_aton('127.0.0.1'))) or die "connect: $!\n";
    my $req = "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx";
    syswrite($sock, $req) == length $req or die "write: $!\n";
    (my $path = $uri) =~ s/\?.*//;
    my $body;
    wait_until(sub { upstream_count($path) == 1 && !upstream_connected() }, 10)
        or die "$key: the upstream exchange did not end\n";
    Test::More::ok(IdempotencyTest::error_log_has('an upstream response is buffered to a temporary file', 1),
                   "$key: the response was parked in a temporary file");
    if ($then eq 'read') {
        my $r = IdempotencyTest::read_response($sock);
        Test::More::is($r->{status}, 201, "$key: the client gets its response");
        Test::More::is(length $r->{body}, 1_000_000, "$key: all of it");
        $body = $r->{body};
    } else {
        setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
        close $sock;
    }
    my $kind = wait_until(sub { (stored_kind(redis_key($key)) // '') =~ /^(response|unreplayable)$/ ? $1 : 0 }, 10);
    Test::More::is($kind, 'response', "$key: the response is stored");
    my $len = IdempotencyTest::stored_plain_size(redis_key($key));
    Test::More::ok($len > 1_000_000, "$key: whole ($len bytes)");
    return unless defined $body;
    my $retry = IdempotencyTest::read_response(send_request($req));
    Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', "$key: the retry gets the replay");
    Test::More::ok($retry->{body} eq $body, "$key: the same bytes as the original's");
}

$ENV{TEST_NGINX_SMALL_PORT} = IdempotencyTest::free_port();
test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: the client resets the connection with the rest of the response in a temporary file: stored whole, the retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SMALL_PORT sndbuf=16k;
    server_name localhost;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 16m;
        proxy_pass http://backend;
    }
}
--- config
location /v1/ {
    idempotency on;
    idempotency_max_response_size 16m;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
main::parked('/v1/parked/1?size=1000000', 'parked-1', 'reset');
--- request eval
["POST /v1/parked/1?size=1000000\nx", "GET /_count/v1/parked/1"]
--- more_headers eval
["Idempotency-Key: parked-1", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1\nContent-Length: 1000000", ""]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1000}/, qr/\A1\z/]
--- timeout: 20


=== TEST 2: the client reads the whole response once the upstream is done: the replay is the same bytes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SMALL_PORT sndbuf=16k;
    server_name localhost;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 16m;
        proxy_pass http://backend;
    }
}
--- config
location /v1/ {
    idempotency on;
    idempotency_max_response_size 16m;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
main::parked('/v1/parked/2?size=1000000&binary=1', 'parked-2', 'read');
--- request
GET /_count/v1/parked/2
--- response_body: 1
