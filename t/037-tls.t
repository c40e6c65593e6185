# TLS to Redis: `idempotency_redis ADDRESS ssl` with the
# idempotency_redis_ssl_* directives, against real redis-server processes
# with TLS ports and certificates made here with openssl: the chain and the
# name (an IP address or a DNS name) checked before AUTH leaves, refusals
# logged with their reason and answered 503, mutual TLS, AUTH over TLS,
# a restart, sessions resumed, and nginx -t's refusals.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf metered_location);
use Test::Nginx::Socket 'no_plan';

our $tls = tls_files();
our ($plain, $port) = start_redis_tls();
our (undef, $other_ca_port) = start_redis_tls(cert => 'other-server');
our (undef, $wrong_name_port) = start_redis_tls(cert => 'wrong-name');
our (undef, $mtls_port) = start_redis_tls(args => ['--tls-auth-clients', 'yes']);
our ($auth_plain, $auth_port) = start_redis_tls();
redis_command_at($auth_plain, 'CONFIG', 'SET', 'requirepass', 'tls-secret-7741');
our (undef, $v13_port) = start_redis_tls(args => ['--tls-protocols', 'TLSv1.3']);
# a server that accepts connections and never says a word: no handshake
$ENV{TEST_NGINX_SILENT_PORT} = IdempotencyTest::start_fake_redis('');
@ENV{qw(TEST_NGINX_TLS_PORT TEST_NGINX_OTHER_CA_PORT TEST_NGINX_WRONG_NAME_PORT TEST_NGINX_MTLS_PORT
        TEST_NGINX_AUTH_TLS_PORT TEST_NGINX_V13_PORT)}
    = ($port, $other_ca_port, $wrong_name_port, $mtls_port, $auth_port, $v13_port);

# What the module keeps under client key $key on the TLS Redis (read on its
# plain port): undef, or the record's kind byte.
sub main::tls_record {
    my ($key) = @_;
    my $value = redis_command_at($main::plain, 'GET', redis_key($key));
    return defined $value ? ord(substr($value, 4, 1)) : undef;
}

test_nginx_defaults();

# A block without a --- config of its own guards "location /" (no status
# header): idempotency on, proxied to the upstream.
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('config', location_conf('/', 'idempotency on', 'proxy_pass http://backend'))
        unless defined $block->config;
});

run_tests();

__DATA__

=== TEST 1: new and replay over TLS, the certificate checked against 127.0.0.1 (an IP address entry)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::idem_location()
--- request eval
["POST /tls/1\nx", "POST /tls/1\nx"]
--- more_headers
Idempotency-Key: tls-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 2: ... the response went through TLS into that Redis
--- init
my $kind = main::tls_record('tls-1');
die "TEST 2: no response stored on the TLS Redis\n" unless defined $kind && $kind == 2;
--- config eval
main::location_conf('= /t', 'return 200 "stored\\n"')
--- request
GET /t
--- response_body
stored


=== TEST 3: a DNS name (localhost): matched against the certificate's DNS entries, sent as SNI
--- http_config
idempotency_redis localhost:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- request eval
["POST /tls/3\nx", "POST /tls/3\nx"]
--- more_headers
Idempotency-Key: tls-3
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 4: a server certificate from another CA: 503, logged with the reason, never with the password
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_OTHER_CA_PORT ssl password=never-logged-5150;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::idem_location()
--- request
POST /other-ca/4
x
--- more_headers
Idempotency-Key: tls-4
--- error_code: 503
--- response_headers_like
Retry-After: [1-9][0-9]*
X-Idempotency-Status: unavailable
--- response_body_like: "status":503[,}]
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: TLS failed: unknown CA: the certificate of Redis does not chain to idempotency_redis_ssl_trusted_certificate \(/
--- no_error_log
never-logged-5150


=== TEST 4b: ... nothing was executed, and the failures are counted
--- init
my $n = IdempotencyTest::upstream_count('/other-ca/4');
die "TEST 4b: /other-ca/4 executed $n times\n" if $n;
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_OTHER_CA_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::metered_location()
--- request eval
["POST /other-ca/4b\nx", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: tls-4b", ""]
--- error_code eval
[503, 200]
--- response_body_like eval
[qr/"status":503[,}]/, qr/^idempotency_redis_tls_failures_total [1-9]/m]


=== TEST 5: a certificate for another name: refused as a name mismatch
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_WRONG_NAME_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request
POST /wrong-name/5
x
--- more_headers
Idempotency-Key: tls-5
--- error_code: 503
--- response_body_like: "status":503[,}]
--- error_log
TLS failed: name mismatch: the certificate of Redis is not for "127.0.0.1" (idempotency_redis_ssl_name)


=== TEST 6: ... accepted with idempotency_redis_ssl_verify off (and nothing was executed while refused)
--- init
my $n = IdempotencyTest::upstream_count('/wrong-name/5');
die "TEST 6: /wrong-name/5 executed $n times\n" if $n;
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_WRONG_NAME_PORT ssl;
idempotency_redis_ssl_verify off;
--- request eval
["POST /wrong-name/6\nx", "POST /wrong-name/6\nx"]
--- more_headers
Idempotency-Key: tls-6
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 7: ... and with idempotency_redis_ssl_name naming what the certificate says
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_WRONG_NAME_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_name redis.example.net;
--- request eval
["POST /wrong-name/7\nx", "POST /wrong-name/7\nx"]
--- more_headers
Idempotency-Key: tls-7
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 8: idempotency_redis_ssl_name set in a location that the certificate does not carry: refused there only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::location_conf('/good/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/renamed/', 'idempotency on',
                      'idempotency_redis_ssl_name redis.example.org', 'proxy_pass http://backend')
--- init
my $status = IdempotencyTest::nginx_post('/good/8', 'tls-8b');
die "TEST 8: /good/ got $status\n" unless $status == 201;
--- request
POST /renamed/8
x
--- more_headers
Idempotency-Key: tls-8a
--- error_code: 503
--- error_log
the certificate of Redis is not for "redis.example.org"


=== TEST 9: mutual TLS: Redis requires a client certificate, and gets one
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_MTLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_certificate $TEST_NGINX_TLS_DIR/client.pem;
idempotency_redis_ssl_certificate_key $TEST_NGINX_TLS_DIR/client.key;
--- request eval
["POST /mtls/9\nx", "POST /mtls/9\nx"]
--- more_headers
Idempotency-Key: tls-9
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 10: ... without a client certificate: 503, logged as such, nothing executed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_MTLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- request
POST /mtls/10
x
--- more_headers
Idempotency-Key: tls-10
--- error_code: 503
--- response_body_like: "status":503[,}]
--- error_log eval
qr/\[error\] .*TLS failed: (client certificate required: Redis asks for|.*may require or refuse the client certificate) \(?idempotency_redis_ssl_certificate/


=== TEST 11: ... with a client certificate of a CA that Redis does not trust: 503, logged as such
--- init
my $n = IdempotencyTest::upstream_count('/mtls/10');
die "TEST 11: /mtls/10 executed $n times\n" if $n;
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_MTLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_certificate $TEST_NGINX_TLS_DIR/other-client.pem;
idempotency_redis_ssl_certificate_key $TEST_NGINX_TLS_DIR/other-client.key;
--- request
POST /mtls/11
x
--- more_headers
Idempotency-Key: tls-11
--- error_code: 503
--- error_log eval
qr/\[error\] .*TLS failed: (unknown CA: Redis does not trust|.*may require or refuse) the client certificate/


=== TEST 12: AUTH over TLS (requirepass): stored and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_AUTH_TLS_PORT ssl password=tls-secret-7741;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- request eval
["POST /auth/12\nx", "POST /auth/12\nx"]
--- more_headers
Idempotency-Key: tls-12
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]
--- no_error_log
[error]
tls-secret-7741


=== TEST 12b: ... a wrong password over TLS is refused, and never logged
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_AUTH_TLS_PORT ssl password=wrong-secret-3318;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- request
POST /auth/12b
x
--- more_headers
Idempotency-Key: tls-12b
--- error_code: 503
--- error_log
refused the handshake: WRONGPASS
--- no_error_log
wrong-secret-3318


=== TEST 13: protocols: TLSv1.2 only against a Redis that speaks TLSv1.3 only: refused, logged as a protocol mismatch
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_V13_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_protocols TLSv1.2;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('/v13/', 'idempotency on', 'idempotency_redis_ssl_protocols TLSv1.3',
                      'idempotency_redis_ssl_ciphers HIGH:!aNULL', 'proxy_pass http://backend')
--- init
my $status = IdempotencyTest::nginx_post('/v13/13', 'tls-13b');
die "TEST 13: TLSv1.3 with its own ciphers got $status\n" unless $status == 201;
--- request
POST /v12/13
x
--- more_headers
Idempotency-Key: tls-13a
--- error_code: 503
--- error_log eval
qr/\[error\] .*TLS failed: protocol: /


=== TEST 14: Redis paused past idempotency_redis_timeout over TLS: 503, not forwarded
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_redis_timeout 200ms',
                    'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
IdempotencyTest::redis_command_at($main::plain, 'CLIENT', 'PAUSE', 1000, 'ALL');
--- request eval
["POST /paused/14\nx", "GET /_count/paused/14"]
--- more_headers eval
["Idempotency-Key: tls-14", ""]
--- error_code eval
[503, 200]
--- response_body_like eval
[qr/"status":503[,}]/, qr/\A0\z/]


=== TEST 15: ... once Redis answers again, a claim that reached it late does not hold off the retry
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- init
IdempotencyTest::redis_command_at($main::plain, 'PING');    # returns when the pause is over
IdempotencyTest::wait_until(sub { (main::tls_record('tls-14') // 0) != 1 }, 3);
--- request eval
["POST /paused/14\nx", "POST /paused/14\nx"]
--- more_headers
Idempotency-Key: tls-14
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!Idempotent-Replayed", "X-Upstream-Execution: 1\nIdempotent-Replayed: true"]


=== TEST 16: Redis restarted under TLS: 503 while it is down, then the module reconnects by itself, and the key is free
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- init
my $status = IdempotencyTest::nginx_post('/restart/16a', 'tls-16a');
die "TEST 16: before the restart: $status\n" unless $status == 201;
IdempotencyTest::cluster_node_stop($main::plain);
$status = IdempotencyTest::nginx_post('/restart/16', 'tls-16b');
die "TEST 16: Redis down: $status\n" unless $status == 503;
IdempotencyTest::cluster_node_start($main::plain);
my $probe = 0;
IdempotencyTest::wait_until(sub { IdempotencyTest::nginx_post('/restart/probe', 'tls-16-probe-' . ++$probe) == 201 }, 10)
    or die "TEST 16: no TLS connection again after the restart\n";
--- request
POST /restart/16
x
--- more_headers
Idempotency-Key: tls-16b
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
!Idempotent-Replayed
--- error_log eval
[qr/Redis 127\.0\.0\.1:\d+ is reachable again/, qr/TLS handshake done \(TLSv1\.3, .*, new session\)/]


=== TEST 17: a connection Redis closed is made again with the TLS session resumed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- init
my $status = IdempotencyTest::nginx_post('/resume/17', 'tls-17a');
die "TEST 17: first request: $status\n" unless $status == 201;
IdempotencyTest::redis_command_at($main::plain, 'CLIENT', 'KILL', 'TYPE', 'normal');
my $probe = 0;
IdempotencyTest::wait_until(sub { IdempotencyTest::nginx_post('/resume/probe', 'tls-17-probe-' . ++$probe) == 201 }, 10)
    or die "TEST 17: no TLS connection again\n";
--- request
POST /resume/17
x
--- more_headers
Idempotency-Key: tls-17a
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
Idempotent-Replayed: true
--- error_log eval
qr/TLS handshake done \(TLSv1\.3, .*, session reused\)/


=== TEST 18: nginx -t: ssl with verification on needs a trusted certificate
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
--- must_die
--- error_log eval
qr/\[emerg\] .*needs "idempotency_redis_ssl_trusted_certificate" while "idempotency_redis_ssl_verify" is on/


=== TEST 19: nginx -t: a trusted certificate file that does not exist
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/missing.pem;
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_redis_ssl_trusted_certificate": cannot open ".*missing\.pem"/


=== TEST 20: nginx -t: a client certificate without its key
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_certificate $TEST_NGINX_TLS_DIR/client.pem;
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_redis_ssl_certificate" ".*client\.pem" needs "idempotency_redis_ssl_certificate_key"/


=== TEST 21: nginx -t: a key that is not the certificate's
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_certificate $TEST_NGINX_TLS_DIR/client.pem;
idempotency_redis_ssl_certificate_key $TEST_NGINX_TLS_DIR/other-client.key;
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_redis_ssl_certificate" ".*client\.pem" with "idempotency_redis_ssl_certificate_key" ".*other-client\.key" cannot be used/


=== TEST 22: nginx -t: ssl on a unix socket
--- http_config
idempotency_redis unix:/tmp/no-such-redis.sock ssl;
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_redis": "ssl" is for TCP addresses, not "unix:\/tmp\/no-such-redis\.sock"/


=== TEST 23: a server that never answers the handshake: 503 within idempotency_redis_timeout, logged
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_SILENT_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_redis_timeout 300ms',
                    'proxy_pass http://backend')
--- request
POST /silent/23
x
--- more_headers
Idempotency-Key: tls-23
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: TLS handshake timed out/
