# idempotency_redis credentials and database: AUTH (ACL user and password)
# and SELECT run on every new connection; a refused handshake is logged and
# requests get 503 (docs/design.md#store-unavailable).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
redis_command('ACL', 'SETUSER', 'gateway', 'on', '>gateway-secret', '~*', '+@all');
redis_command('ACL', 'SETUSER', 'from-file', 'on', '>pw-from-file-6172', '~*', '+@all');
redis_command('ACL', 'SETUSER', 'from-env', 'on', '>pw-from-env-8391', '~*', '+@all');
$ENV{IDEMPOTENCY_TEST_REDIS_PASSWORD} = 'pw-from-env-8391';
run_tests();

__DATA__

=== TEST 1: an ACL user with a password and db=3 stores and replays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT db=3 username=gateway password=gateway-secret;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
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
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
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
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
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


=== TEST 4: the password from a file (first line), never written to the log
--- user_files
>>> redis.password
pw-from-file-6172
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT username=from-file password_file=../html/redis.password;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /auth/4\nx", "POST /auth/4\nx"]
--- more_headers
Idempotency-Key: auth-4
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log eval
[qr/pw-from-file-6172/, qr/\[error\]/]


=== TEST 5: the password from the environment of the nginx that reads the configuration
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT username=from-env password_env=IDEMPOTENCY_TEST_REDIS_PASSWORD;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /auth/5\nx", "POST /auth/5\nx"]
--- more_headers
Idempotency-Key: auth-5
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log eval
[qr/pw-from-env-8391/, qr/\[error\]/]


=== TEST 6: an unset password_env variable is refused by nginx -t
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT username=from-env password_env=IDEMPOTENCY_TEST_UNSET_VARIABLE;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- must_die
--- error_log
the environment variable "IDEMPOTENCY_TEST_UNSET_VARIABLE" of password_env= is not set


=== TEST 7: a wrong password is refused, and the refused password is not logged either
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT username=gateway password=wrong-pw-5517;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /auth/7
x
--- more_headers
Idempotency-Key: auth-7
--- error_code: 503
--- error_log
refused the handshake: WRONGPASS
--- no_error_log
wrong-pw-5517
