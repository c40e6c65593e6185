# What the operator sees in the error log: one line when Redis is lost and
# one when it is back; the client's raw key and the bodies never appear
# above debug level.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: Redis up: a request goes through, nothing logged at error level
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /log/1
x
--- more_headers
Idempotency-Key: log-1
--- error_code: 201
--- no_error_log
[error]


=== TEST 2: Redis lost: the loss is logged, the request gets 503
--- init
IdempotencyTest::stop_redis();
--- request
POST /log/2
x
--- more_headers
Idempotency-Key: log-2
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: (connection closed by Redis|connect\(\) failed|recv\(\) failed)/


=== TEST 3: Redis back: logged once as reachable again, requests protected
--- init
IdempotencyTest::start_redis();
my $probe = 0;
IdempotencyTest::wait_until(sub {
    my $s = IdempotencyTest::send_request("POST /log/probe HTTP/1.0\r\n"
        . "Idempotency-Key: log-probe-" . ++$probe . "\r\nContent-Length: 1\r\n\r\nx");
    my $response = do { local $/; <$s> } // '';
    close $s;
    $response =~ m{\AHTTP/1\.\d 201 };
}, 10) or die "the module never reconnected\n";
--- request
POST /log/3
x
--- more_headers
Idempotency-Key: log-3
--- error_code: 201
--- error_log eval
qr/\[warn\] .*idempotency: Redis 127\.0\.0\.1:\d+ is reachable again/


=== TEST 4: the raw key and the body never appear above debug level, whatever happens
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /log/4
BODY-MARKER-4711
--- more_headers
Idempotency-Key: raw-key-SECRET-4711
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency/
--- no_error_log eval
[qr/\[(?:info|notice|warn|error|crit|alert|emerg)\][^\n]*SECRET-4711/,
 qr/\[(?:info|notice|warn|error|crit|alert|emerg)\][^\n]*BODY-MARKER-4711/]


=== TEST 5: the same for a replay and a mismatch (info lines name the hashed Redis key)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request eval
["POST /log/5\nBODY-MARKER-4712", "POST /log/5\nBODY-MARKER-4712", "POST /log/5\nother"]
--- more_headers
Idempotency-Key: raw-key-SECRET-4712
--- error_code eval
[201, 201, 422]
--- no_error_log eval
[qr/\[(?:info|notice|warn|error|crit|alert|emerg)\][^\n]*SECRET-4712/,
 qr/\[(?:info|notice|warn|error|crit|alert|emerg)\][^\n]*BODY-MARKER-4712/]


=== TEST 6: a Redis whose maxmemory-policy can evict the module's keys is warned about, once per connection
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru');
IdempotencyTest::nginx_post('/log/6a', 'evict-6a') == 201 or die "the first POST failed\n";
IdempotencyTest::nginx_post('/log/6b', 'evict-6b') == 201 or die "the second POST failed\n";
--- request
POST /log/6c
x
--- more_headers
Idempotency-Key: evict-6c
--- error_code: 201
--- grep_error_log eval
qr/\[warn\] .*has maxmemory-policy [\w-]+: when full it evicts claims and stored responses.*set maxmemory-policy noeviction/
--- grep_error_log_out eval
qr/\A[^\n]*has maxmemory-policy volatile-lru[^\n]*\n\z/


=== TEST 7: with noeviction nothing is said
--- init
IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /log/7
x
--- more_headers
Idempotency-Key: evict-7
--- error_code: 201
--- no_error_log
maxmemory-policy


=== TEST 8: error_log at debug level tells one key's story: claimed, forwarded, captured, stored
--- log_level: debug
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /log/8
trace-8
--- more_headers
Idempotency-Key: log-8
--- error_code: 201
--- grep_error_log eval
qr/idempotency: (?:claiming "idem:[0-9a-f]{64}"|claim of "idem:[0-9a-f]{64}" answered: \w+|forwarding the request|captured the response to "idem:[0-9a-f]{64}": status \d+|storing \d+ bytes)/
--- grep_error_log_out eval
qr/\Aidempotency: claiming "idem:[0-9a-f]{64}"\nidempotency: claim of "idem:[0-9a-f]{64}" answered: new\nidempotency: forwarding the request\nidempotency: captured the response to "idem:[0-9a-f]{64}": status 201\nidempotency: storing \d+ bytes\n\z/


=== TEST 9: ... and a retry's (after the first request's, made in --- init): claimed, answered with the stored response, replayed
--- log_level: debug
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- init
IdempotencyTest::nginx_post('/log/9', 'log-9') == 201 or die "the first POST failed\n";
IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('log-9')) // '') eq 'response' })
    or die "the first response was not stored\n";
--- request
POST /log/9
x
--- more_headers
Idempotency-Key: log-9
--- error_code: 201
--- grep_error_log eval
qr/idempotency: (?:claiming "idem:[0-9a-f]{64}"|claim of "idem:[0-9a-f]{64}" answered: \w+|replaying the response)/
--- grep_error_log_out eval
qr/\A(?:idempotency: claiming "idem:[0-9a-f]{64}"\nidempotency: claim of "idem:[0-9a-f]{64}" answered: new\n)idempotency: claiming "idem:[0-9a-f]{64}"\nidempotency: claim of "idem:[0-9a-f]{64}" answered: replayed\nidempotency: replaying the response\n\z/
