# idempotency_wait: a duplicate of an in-flight original waits for it, then
# gets the replay ($idempotency_status "waited"); when the wait runs out it
# gets 409; when the original is released (5xx) the duplicate executes
# (SPEC rule 7).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a duplicate waits for the original and gets its response
--- init
our $original = IdempotencyTest::start_in_flight('/wait/1?sleep=1', 'wait-1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_wait 5s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /wait/1?sleep=1
x
--- more_headers
Idempotency-Key: wait-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
X-Idempotency-Status: waited
--- response_body_like: "execution":1,


=== TEST 2: when the wait runs out the duplicate gets 409 with Retry-After
--- init
our $original = IdempotencyTest::start_in_flight('/wait/2?sleep=3', 'wait-2');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_wait 300ms;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /wait/2?sleep=3
x
--- more_headers
Idempotency-Key: wait-2
--- error_code: 409
--- response_headers
Retry-After: 1
Content-Type: application/problem+json
X-Idempotency-Status: conflict


=== TEST 3: when the original is released by a 5xx the waiting duplicate executes
--- init
our $original = IdempotencyTest::start_in_flight('/wait/3?sleep=1&status=503', 'wait-3');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_wait 5s;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /wait/3?sleep=1&status=503
x
--- more_headers
Idempotency-Key: wait-3
--- error_code: 503
--- response_headers
X-Upstream-Execution: 2
X-Idempotency-Status: released
