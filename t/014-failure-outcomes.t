# What happens when the exchange with the upstream fails, by one rule: never
# execute twice silently. A request that never left frees its key; a request
# the upstream got but whose response never completed keeps it (retries get
# 410); the upstream's own 5xx frees it (docs/design.md#not-executed,
# #unreplayable).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: nginx times out on an upstream that got the request: 504, and the retry gets 410, not a second execution
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_read_timeout 300ms;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /fail/1?sleep=1\nx", "POST /fail/1?sleep=1\nx", "GET /_count/fail/1"]
--- more_headers eval
["Idempotency-Key: fail-1", "Idempotency-Key: fail-1", ""]
--- error_code eval
[504, 410, 200]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: unreplayable\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/504/, qr/"status":410/, qr/\A1\z/]


=== TEST 2: the upstream resets the connection mid-body: the retry gets 410, not a second execution
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
# the client of the broken exchange: it gets a truncated body
my $sock = IdempotencyTest::send_request(
    "POST /fail/2?size=200000&reset=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Idempotency-Key: fail-2\r\nContent-Length: 1\r\n\r\nx");
my $got = '';
1 while sysread($sock, $got, 65536, length $got);
close $sock;
Idem::Store::stored('fail-2', 'unreplayable') or die "the broken exchange left no unreplayable marker\n";
--- request eval
["POST /fail/2?size=200000&reset=1\nx", "GET /_count/fail/2"]
--- more_headers eval
["Idempotency-Key: fail-2", ""]
--- error_code eval
[410, 200]
--- response_headers eval
["X-Idempotency-Status: unreplayable", ""]
--- response_body_like eval
[qr/"status":410/, qr/\A1\z/]


=== TEST 3: the upstream's own 503 frees the key: the retry executes again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /fail/3?status=503\nx", "POST /fail/3?status=503\nx"]
--- more_headers
Idempotency-Key: fail-3
--- error_code eval
[503, 503]
--- response_headers eval
["X-Upstream-Execution: 1\nX-Idempotency-Status: released", "X-Upstream-Execution: 2\nX-Idempotency-Status: released"]


=== TEST 4: a client that gives up while sending its body claims nothing: its retry executes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- init
my $sock = IdempotencyTest::send_request(
    "POST /fail/4 HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: fail-4\r\n"
    . "Content-Length: 100\r\n\r\namount=1");
close $sock;    # 8 of the 100 bytes: the body never completes
--- request
POST /fail/4
amount=100
--- more_headers
Idempotency-Key: fail-4
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log
client prematurely closed connection
