# Redis answering errors, and replies that arrive in many small pieces
# (docs/design.md#store-unavailable): an error reply to the claim is a 503 with nothing
# forwarded; a flushed script cache is reloaded by itself; a reply split
# across many reads is parsed as one.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_TRICKLE_PORT} = start_trickle_proxy(redis_port());
$ENV{TEST_NGINX_HUGE_ARRAY_PORT} = start_fake_redis("*100000000\r\n");
test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: Redis out of memory: 503 with Retry-After, the error logged, nothing forwarded
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', '1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request
POST /err/1
x
--- more_headers
Idempotency-Key: err-1
--- error_code: 503
--- response_headers
Retry-After: 1
Content-Type: application/problem+json
--- response_body_like: "status":503
--- error_log
refused the claim: OOM


=== TEST 2: ... and the upstream was not contacted
--- request
GET /_count/err/1
--- response_body: 0


=== TEST 3: a read-only replica: 503, the error logged, nothing forwarded
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', '0');
# a replica of a master that does not exist: it refuses writes
IdempotencyTest::redis_command('REPLICAOF', '127.0.0.1', '1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request
POST /err/2
x
--- more_headers
Idempotency-Key: err-2
--- error_code: 503
--- response_body_like: "status":503
--- error_log
refused the claim: READONLY


=== TEST 4: ... and the upstream was not contacted
--- request
GET /_count/err/2
--- response_body: 0


=== TEST 5: a script cache flushed after the connection loaded it (NOSCRIPT) is reloaded and the response still stored
--- init
IdempotencyTest::redis_command('REPLICAOF', 'NO', 'ONE');
# the connection up (it loads the scripts first), then the cache flushed
IdempotencyTest::nginx_post('/err/3w', 'err-3w') == 201 or die "no connection to Redis\n";
IdempotencyTest::redis_command('SCRIPT', 'FLUSH');
IdempotencyTest::redis_command('CONFIG', 'RESETSTAT');
# no lease (lock_ttl within the margin): the store is the fenced script
IdempotencyTest::nginx_post('/err/3', 'err-3') == 201 or die "POST /err/3 did not execute\n";
IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('err-3')) // '') eq 'response' }, 10)
    or die "the response was not stored\n";
Test::More::like(IdempotencyTest::redis_command('INFO', 'errorstats'), qr/errorstat_NOSCRIPT:count=[1-9]/,
                 'TEST 5: the store met NOSCRIPT')
    unless eval { IdempotencyTest::redis_command('SET', 'idem-probe', 'v', 'IFEQ', 'x'); 1 };  # no script there
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_lock_ttl 1s', 'idempotency_redis_timeout 1s',
                    'proxy_pass http://backend')
--- request
POST /err/3
x
--- more_headers
Idempotency-Key: err-3
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
Idempotent-Replayed: true
--- no_error_log
[error]


=== TEST 6: replies split across many reads are parsed as one
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TRICKLE_PORT;
--- config eval
main::location_conf('/', 'idempotency on',
                    '# the proxy hands on a few bytes a millisecond: on a loaded machine the',
                    '# handshake\'s INFO reply alone can take longer than the default 1 s',
                    'idempotency_redis_timeout 10s', 'proxy_pass http://backend')
--- request eval
["POST /err/4?size=1500&cookies=2\nx", "POST /err/4?size=1500&cookies=2\nx"]
--- more_headers
Idempotency-Key: err-4
--- error_code eval
[201, 201]
--- response_body_like eval
[qr/\A[a-zA-Z0-9\n]{1500}\z/, qr/\A[a-zA-Z0-9\n]{1500}\z/]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 1\nIdempotent-Replayed: true\nSet-Cookie: c1=v1, c2=v2"]
--- no_error_log
[error]


=== TEST 7: a server announcing a huge array is refused at once, nothing allocated for it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_HUGE_ARRAY_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_redis_timeout 5s',
                    'proxy_pass http://backend')
--- request
POST /err/7
x
--- more_headers
Idempotency-Key: err-7
--- error_code: 503
--- error_log
malformed reply
--- timeout: 3
