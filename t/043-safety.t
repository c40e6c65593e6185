# Safe by default: no secret in nginx -t's messages (a parameter is named,
# never its value); a warning when a Redis password goes over TLS that is
# not verified; a stored response that must not be sent again (a status
# outside 100-599, a header name that is not a token, a header value with
# CR, LF or NUL: written to Redis by someone else) is never replayed: 410,
# logged with its Redis key, the upstream not contacted.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';
use Digest::SHA ();

IdempotencyTest::tls_files();

# A response record as the module writes it (module/record.hpp, version 1):
# "IDM" 1 2 fingerprint(32) status(2) header_count(2)
# { name_len(2) name value_len(4) value } body_len(4) body; the fingerprint
# is SHA-256 over "METHOD\nURI\n" and the body.
sub crafted_response {
    my ($method, $uri, $request_body, $status, $headers, $body) = @_;
    my $record = "IDM\x01\x02" . Digest::SHA::sha256("$method\n$uri\n$request_body")
        . pack('nn', $status, scalar @$headers);
    for my $h (@$headers) {
        $record .= pack('n', length $h->[0]) . $h->[0] . pack('N', length $h->[1]) . $h->[1];
    }
    return $record . pack('N', length $body) . $body;
}

sub store_crafted {
    my ($key, @response) = @_;
    IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key($key), crafted_response(@response),
                                   'PX', 600_000);
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a mistyped password parameter is named, never shown
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT sentinel_password=leaked-secret-7781;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid parameter "sentinel_password=" in "idempotency_redis"/
--- no_error_log
leaked-secret-7781


=== TEST 2: ... whatever its spelling
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_REDIS_PORT Password=leaked-secret-7782;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid parameter "Password=" in "idempotency_redis_sentinel"/
--- no_error_log
leaked-secret-7782


=== TEST 3: credentials written into the address are not shown
--- http_config
idempotency_redis app:leaked-secret-7783@127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid Redis address "\(credentials not shown\)\@127\.0\.0\.1:\d+" in "idempotency_redis".*username= and password=/
--- no_error_log
leaked-secret-7783


=== TEST 4: a password given to password_env= is not shown
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT password_env=leaked/secret-7784;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*password_env= takes the name of an environment variable/
--- no_error_log
leaked/secret-7784


=== TEST 5: idempotency_redis_ssl_verify off with a password: nginx -t warns, naming the Redis server
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT ssl password=tls-secret-7785;
idempotency_redis_ssl_verify off;
--- config
location / {
    idempotency on;
    return 204;
}
--- request
GET /
--- error_code: 204
--- error_log eval
qr/\[warn\] .*"idempotency_redis_ssl_verify off": the password for Redis 127\.0\.0\.1:\d+ is sent to whichever server answers/
--- no_error_log
tls-secret-7785


=== TEST 6: ... a password from a file too
--- user_files
>>> redis.password
from-a-file-7786
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT ssl password_file=../html/redis.password;
--- config
location / {
    idempotency on;
    idempotency_redis_ssl_verify off;
    return 204;
}
--- request
GET /
--- error_code: 204
--- error_log eval
qr/\[warn\] .*"idempotency_redis_ssl_verify off": the password for Redis 127\.0\.0\.1:\d+ is sent/
--- no_error_log
from-a-file-7786


=== TEST 7: no warning without a password, nor with verification on
--- config
location /no-password/ {
    idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT ssl;
    idempotency on;
    idempotency_scope "";
    idempotency_redis_ssl_verify off;
    return 204;
}
location /verified/ {
    idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT ssl password=tls-secret-7787;
    idempotency on;
    idempotency_scope "";
    idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
    return 204;
}
--- request
GET /verified/
--- error_code: 204
--- no_error_log
[warn]
[emerg]


=== TEST 8: a crafted record that is a valid response is replayed: the crafted layout is the module's
--- init
main::store_crafted('rec-ok', 'POST', '/rec/ok', 'x', 201,
                    [['Content-Type', 'text/plain'], ['X-Crafted', 'yes']], "crafted body");
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rec/ok\nx", "GET /_count/rec/ok"]
--- more_headers eval
["Idempotency-Key: rec-ok", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["X-Crafted: yes\nIdempotent-Replayed: true\nX-Idempotency-Status: replayed\nContent-Type: text/plain", ""]
--- response_body eval
["crafted body", "0"]
--- no_error_log
[error]


=== TEST 9: a stored header value with CR LF is never replayed: 410, logged with the key, not executed
--- init
main::store_crafted('rec-crlf', 'POST', '/rec/crlf', 'x', 200,
                    [['X-A', "b\r\nSet-Cookie: injected-7791=1"]], "body");
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /rec/crlf
x
--- more_headers
Idempotency-Key: rec-crlf
--- error_code: 410
--- response_headers
Content-Type: application/problem+json
X-Idempotency-Status: unreplayable
!Set-Cookie
!X-A
!Idempotent-Replayed
--- response_body_like: "type":"[^"]*response-unverifiable"
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: its response has a header value with CR, LF or NUL, and is never replayed/
--- no_error_log
injected-7791


=== TEST 10: a NUL in a value, a header name that is not a token, a status outside 200-599: 410 each; the upstream never contacted
--- init
main::store_crafted('rec-nul', 'POST', '/rec/nul', 'x', 200, [['X-A', "b\0c"]], "body");
main::store_crafted('rec-name', 'POST', '/rec/name', 'x', 200, [['X-A: b', "c"]], "body");
main::store_crafted('rec-status', 'POST', '/rec/status', 'x', 700, [], "body");
main::store_crafted('rec-status-low', 'POST', '/rec/status-low', 'x', 99, [], "body");
# a 1xx is no final answer: its body would be read as the response after it
main::store_crafted('rec-status-info', 'POST', '/rec/status-info', 'x', 100, [], "HTTP/1.1 200 OK\r\nX-Injected: 1\r\n\r\n");
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rec/nul\nx", "POST /rec/name\nx", "POST /rec/status\nx", "POST /rec/status-low\nx",
 "POST /rec/status-info\nx",
 "GET /_count/rec/nul", "GET /_count/rec/name", "GET /_count/rec/status", "GET /_count/rec/status-low",
 "GET /_count/rec/status-info", "GET /_count/rec/crlf"]
--- more_headers eval
["Idempotency-Key: rec-nul", "Idempotency-Key: rec-name", "Idempotency-Key: rec-status",
 "Idempotency-Key: rec-status-low", "Idempotency-Key: rec-status-info", "", "", "", "", "", ""]
--- error_code eval
[410, 410, 410, 410, 410, 200, 200, 200, 200, 200, 200]
--- response_headers eval
["X-Idempotency-Status: unreplayable", "X-Idempotency-Status: unreplayable",
 "X-Idempotency-Status: unreplayable", "X-Idempotency-Status: unreplayable",
 "X-Idempotency-Status: unreplayable", "", "", "", "", "", ""]
--- response_body_like eval
[qr/response-unverifiable/, qr/response-unverifiable/, qr/response-unverifiable/, qr/response-unverifiable/,
 qr/response-unverifiable/, qr/\A0\z/, qr/\A0\z/, qr/\A0\z/, qr/\A0\z/, qr/\A0\z/, qr/\A0\z/]


=== TEST 11: a record of a later release's layout (a version above this one's) is never replayed nor executed again: 410, logged
--- init
my $later = main::crafted_response('POST', '/rec/later', 'x', 200, [], "body");
substr($later, 3, 1) = "\x06";
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('rec-later'), $later . "\x28\xb5\x2f\xfd-pieces?", 'PX', 600_000);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request
POST /rec/later
x
--- more_headers
Idempotency-Key: rec-later
--- error_code: 410
--- response_headers
X-Idempotency-Status: unreplayable
!Idempotent-Replayed
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: it is a record of a later release's layout, which this one does not read/


=== TEST 12: ... with another body too (its fingerprint is not read), and the upstream is never contacted
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rec/later\nother body", "GET /_count/rec/later"]
--- more_headers eval
["Idempotency-Key: rec-later", ""]
--- error_code eval
[410, 200]
--- response_headers eval
["X-Idempotency-Status: unreplayable", ""]
--- response_body_like eval
[qr/response-unverifiable/, qr/\A0\z/]


=== TEST 13: a record of ours cut short, extended, or of version 0, and a compressed one of a later plain version: 410 each, never 503 (which a client retries for the whole idempotency_ttl), never executed
--- init
my $whole = main::crafted_response('POST', '/rec/cut', 'x', 200, [['X-A', 'b']], "body");
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('rec-cut'), substr($whole, 0, 20), 'PX', 600_000);
my $long = main::crafted_response('POST', '/rec/long', 'x', 200, [['X-A', 'b']], "body");
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('rec-long'), $long . 'x', 'PX', 600_000);
my $zero = main::crafted_response('POST', '/rec/zero', 'x', 200, [], "body");
substr($zero, 3, 1) = "\x00";
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('rec-zero'), $zero, 'PX', 600_000);
# version 3 (compressed): the prefix, status, form 1, a plain version 9, its size, a frame
my $later = main::crafted_response('POST', '/rec/inner', 'x', 200, [], "body");
my $packed = "IDM\x03\x02" . substr($later, 5, 32) . pack('n', 200) . "\x01\x09" . pack('N', 10) . "\x28\xb5\x2f\xfd";
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('rec-inner'), $packed, 'PX', 600_000);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /rec/cut\nx", "POST /rec/long\nx", "POST /rec/zero\nx", "POST /rec/inner\nx",
 "GET /_count/rec/cut", "GET /_count/rec/long", "GET /_count/rec/zero", "GET /_count/rec/inner"]
--- more_headers eval
["Idempotency-Key: rec-cut", "Idempotency-Key: rec-long", "Idempotency-Key: rec-zero", "Idempotency-Key: rec-inner",
 "", "", "", ""]
--- error_code eval
[410, 410, 410, 410, 200, 200, 200, 200]
--- response_body_like eval
[qr/response-unverifiable/, qr/response-unverifiable/, qr/response-unverifiable/, qr/response-unverifiable/,
 qr/\A0\z/, qr/\A0\z/, qr/\A0\z/, qr/\A0\z/]
