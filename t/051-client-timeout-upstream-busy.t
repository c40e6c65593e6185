# A client that stops reading while the upstream is still sending
# (docs/design.md#client-leaves): nginx's send_timeout fires in the
# upstream module's own write handler, which would end the exchange
# ("client timed out") with the rest of the response unread. The module
# lets the client go there instead, and the upstream exchange runs on to its
# end through the capture: the response is stored whole, the retry gets
# the replay, one execution. The upstream here sends 1 MB in four pieces
# 0.4 s apart to a client that reads nothing, through a server block whose
# sockets have a small send buffer, so send_timeout (300 ms) fires long
# before it is done: with proxy_buffering on (TEST 1) and off, chunked
# (TEST 2). The retry goes to the default server block, of the same name:
# the same key space.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Socket qw(AF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF inet_aton pack_sockaddr_in);
use Test::Nginx::Socket 'no_plan';

# POSTs with the key from a socket with a small receive buffer that never
# reads; waits until the module has stored something for the key, the
# socket kept open (the client is stalled, not gone), and checks what.
our %stalled;

sub stall {
    my ($uri, $key) = @_;
    socket(my $sock, AF_INET, SOCK_STREAM, 0) or die "socket: $!\n";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 4096) or die "setsockopt: $!\n";
    connect($sock, pack_sockaddr_in($ENV{TEST_NGINX_SMALL_PORT}, inet_aton('127.0.0.1'))) or die "connect: $!\n";
    my $req = "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx";
    syswrite($sock, $req) == length $req or die "write: $!\n";
    my $kind = wait_until(sub { (stored_kind(redis_key($key)) // '') =~ /^(response|unreplayable)$/ ? $1 : 0 }, 20);
    $stalled{$key} = $sock;
    Test::More::is($kind, 'response', "$key: the stalled request stored its response");
    Test::More::ok(IdempotencyTest::error_log_has('idempotency: client timed out, the response to', 1),
                   "$key: send_timeout fired while the upstream was still sending");
    my $len = IdempotencyTest::stored_plain_size(redis_key($key));
    Test::More::ok($len > 1_000_000, "$key: the whole body stored ($len bytes)");
}

$ENV{TEST_NGINX_SMALL_PORT} = IdempotencyTest::free_port();
test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: buffered: send_timeout fires while the upstream still sends: stored whole, the retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SMALL_PORT sndbuf=16k;
    server_name localhost;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 16m;
        send_timeout 300ms;
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
main::stall('/v1/busy/1?size=1000000&trickle=0.4', 'busy-1');
--- request eval
["POST /v1/busy/1?size=1000000&trickle=0.4\nx", "GET /_count/v1/busy/1"]
--- more_headers eval
["Idempotency-Key: busy-1", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1\nContent-Length: 1000000", ""]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1000}/, qr/\A1\z/]
--- timeout: 20


=== TEST 2: unbuffered, chunked: send_timeout fires while the upstream still sends: stored whole, the retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SMALL_PORT sndbuf=16k;
    server_name localhost;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 16m;
        send_timeout 300ms;
        proxy_buffering off;
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
main::stall('/v1/busy/2?size=1000000&trickle=0.4&chunked=1', 'busy-2');
--- request eval
["POST /v1/busy/2?size=1000000&trickle=0.4&chunked=1\nx", "GET /_count/v1/busy/2"]
--- more_headers eval
["Idempotency-Key: busy-2", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1000}/, qr/\A1\z/]
--- timeout: 20
