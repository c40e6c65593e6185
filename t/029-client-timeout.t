# A client that stops reading is the first execution's case
# too (docs/design.md#client-leaves): when nginx's send_timeout fires on a client that no
# longer reads a response larger than the socket buffers, the upstream
# exchange still runs to its end and the response is stored, with
# proxy_buffering on (the rest parked in a temporary file) or off; the
# client's retry gets the replay, not 410 and not a second execution.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Socket qw(AF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF inet_aton pack_sockaddr_in);
use Test::Nginx::Socket 'no_plan';

# POSTs with the key from a socket with a small receive buffer, never reads,
# and waits until the module has stored the response. Returns the socket
# (kept open: the client is stalled, not gone).
sub stall {
    my ($uri, $key) = @_;
    socket(my $sock, AF_INET, SOCK_STREAM, 0) or die "socket: $!\n";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 4096) or die "setsockopt: $!\n";
    connect($sock, pack_sockaddr_in(IdempotencyTest::nginx_port(), inet_aton('127.0.0.1')))
        or die "connect: $!\n";
    my $req = "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx";
    syswrite($sock, $req) == length $req or die "write: $!\n";
    IdempotencyTest::wait_until(sub {
        (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') =~ /^(response|unreplayable)$/
    }, 20) or die "nothing stored for $key\n";
    return $sock;
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: buffered: the client stops reading, send_timeout fires, its retry gets the whole replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency on;
    idempotency_max_response_size 16m;
    send_timeout 500ms;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
$main::stalled = main::stall('/v1/stall/1?size=6000000', 'stall-1');
--- request eval
["POST /v1/stall/1?size=6000000\nx", "GET /_count/v1/stall/1"]
--- more_headers eval
["Idempotency-Key: stall-1", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1\nContent-Length: 6000000", ""]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1000}/, qr/\A1\z/]


=== TEST 2: unbuffered: the client stops reading, send_timeout fires, its retry gets the whole replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency on;
    idempotency_max_response_size 16m;
    send_timeout 500ms;
    proxy_buffering off;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
$main::stalled = main::stall('/v1/stall/2?size=6000000', 'stall-2');
--- request eval
["POST /v1/stall/2?size=6000000\nx", "GET /_count/v1/stall/2"]
--- more_headers eval
["Idempotency-Key: stall-2", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1\nContent-Length: 6000000", ""]
