# idempotency_redis credentials and database: AUTH (ACL user and password)
# and SELECT run on every new connection; a refused handshake is logged and
# requests get 503 (SPEC: idempotency_redis, rule 10).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
redis_command('ACL', 'SETUSER', 'gateway', 'on', '>gateway-secret', '~*', '+@all');
run_tests();

__DATA__

=== TEST 1: an ACL user with a password and db=3 stores and replays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT db=3 username=gateway password=gateway-secret;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request eval
["POST /auth/1\nx", "POST /auth/1\nx"]
--- more_headers
Idempotency-Key: auth-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 2: the record went to database 3, not 0
--- init
my $key = IdempotencyTest::redis_key('auth-1');
die "stored in db 0\n" if defined IdempotencyTest::stored_kind($key);
my $in_db3 = IdempotencyTest::redis_command('EVAL', "redis.call('SELECT', 3) return redis.call('EXISTS', KEYS[1])", 1, $key);
die "not stored in db 3\n" unless $in_db3 == 1;
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT db=3 username=gateway password=gateway-secret;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /auth/1
x
--- more_headers
Idempotency-Key: auth-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true


=== TEST 3: a wrong password is refused: logged, and the request gets 503
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT username=gateway password=wrong;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /auth/3
x
--- more_headers
Idempotency-Key: auth-3
--- error_code: 503
--- response_headers
Retry-After: 1
Content-Type: application/problem+json
--- error_log
refused the handshake: WRONGPASS
