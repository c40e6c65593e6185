# The case the module exists for (docs/design.md#first-execution): the client goes away before
# it has the response; the upstream exchange still runs to its end, the
# response is stored, and the client's retry gets the replay instead of a
# second execution. The configuration is the README's, with no proxy directive
# added for it (no proxy_ignore_client_abort).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: the client leaves before the upstream answers; its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency          on;
    idempotency_required on;
    idempotency_scope    $http_authorization;
    proxy_pass           http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $client = IdempotencyTest::send_request(
    "POST /v1/abort/1?sleep=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Authorization: Bearer client-a\r\nIdempotency-Key: abort-1\r\n"
    . "Content-Length: 10\r\n\r\namount=100");
close $client;    # gone before the upstream has answered
IdempotencyTest::wait_until(sub {
    my $rkey = IdempotencyTest::redis_key('abort-1', 'Bearer client-a');
    (IdempotencyTest::stored_kind($rkey) // '') eq 'response'
}, 10);
--- request eval
["POST /v1/abort/1?sleep=1\namount=100", "GET /_count/v1/abort/1"]
--- more_headers eval
["Authorization: Bearer client-a\nIdempotency-Key: abort-1", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 2: the client leaves in the middle of a large body; its retry gets all of it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency          on;
    idempotency_required on;
    idempotency_scope    $http_authorization;
    proxy_pass           http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $client = IdempotencyTest::send_request(
    "POST /v1/abort/2?size=600000&trickle=0.3 HTTP/1.1\r\nHost: localhost\r\n"
    . "Connection: close\r\nAuthorization: Bearer client-a\r\n"
    . "Idempotency-Key: abort-2\r\nContent-Length: 1\r\n\r\nx");
my ($got, $ready) = ('', IO::Select->new($client));
while (length($got) < 4096 && $ready->can_read(5)) {    # a few KB, then gone
    last unless sysread($client, $got, 1024, length $got);
}
close $client;
IdempotencyTest::wait_until(sub {
    my $rkey = IdempotencyTest::redis_key('abort-2', 'Bearer client-a');
    (IdempotencyTest::stored_kind($rkey) // '') eq 'response'
}, 10);
--- request eval
["POST /v1/abort/2?size=600000&trickle=0.3\nx", "GET /_count/v1/abort/2"]
--- more_headers eval
["Authorization: Bearer client-a\nIdempotency-Key: abort-2", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Content-Length: 600000\nIdempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body eval
my $line = CORE::join('', 'a' .. 'z', 'A' .. 'Z', '0' .. '9') . "\n";
[substr($line x (600000 / length($line) + 1), 0, 600000), "1"]
--- no_error_log
[error]
