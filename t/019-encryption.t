# idempotency_encrypt_key: every stored response is encrypted and
# authenticated (AES-256-GCM) under the first key, bound to its Redis key; a
# record that was altered, moved to another key, sealed with an unknown key,
# or not encrypted at all is refused and logged, never replayed, never
# executed again; older keys still open their records.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location counted_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
our $OLD = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
our $NEW = 'fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210';
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('user_files', ">>> old.key\n$OLD\n>>> new.key\n$NEW\n>>> short.key\nabc\n");
});
run_tests();

__DATA__

=== TEST 1: stored encrypted, replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_pass http://backend')
--- request eval
["POST /enc/1?header=X-Card:4242424242424242\nx", "POST /enc/1?header=X-Card:4242424242424242\nx"]
--- more_headers
Idempotency-Key: enc-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\nX-Card: 4242424242424242", "Idempotent-Replayed: true\nX-Upstream-Execution: 1\nX-Card: 4242424242424242"]
--- no_error_log
[error]


=== TEST 2: a Redis dump shows no response: the value is an envelope, not a record
--- init
my $value = IdempotencyTest::redis_command('GET', IdempotencyTest::redis_key('enc-1'));
die "not sealed\n" unless defined $value && substr($value, 0, 4) eq "IDE\x01";
die "the response is readable in Redis\n" if $value =~ /4242424242424242|execution|X-Card/;
--- request
GET /_count/enc/1
--- response_body: 1


=== TEST 3: a record altered in Redis is refused: 410, logged, not executed again
--- init
my $rkey = IdempotencyTest::redis_key('enc-1');
my $value = IdempotencyTest::redis_command('GET', $rkey);
substr($value, 30, 1) = chr(ord(substr($value, 30, 1)) ^ 1);
IdempotencyTest::redis_command('SET', $rkey, $value);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_encrypt_key ../html/old.key')
--- request
POST /enc/1?header=X-Card:4242424242424242
x
--- more_headers
Idempotency-Key: enc-1
--- error_code: 410
--- response_headers
Content-Type: application/problem+json
X-Idempotency-Status: unreplayable
--- response_body_like: "type":"[^"]*response-unverifiable"
--- error_log
does not open: altered, or moved from another key


=== TEST 4: a record moved to another key is refused
--- init
my $src = IdempotencyTest::redis_key('enc-1');
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('enc-4'), IdempotencyTest::redis_command('GET', $src));
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_pass http://backend')
--- request
POST /enc/1?header=X-Card:4242424242424242
x
--- more_headers
Idempotency-Key: enc-4
--- error_code: 410
--- error_log
does not open


=== TEST 5: rotation, before: a record sealed with the old key
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_pass http://backend')
--- request
POST /enc/5
x
--- more_headers
Idempotency-Key: enc-5
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1


=== TEST 6: rotation, after: the new key comes first, the old one still opens the record
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on',
                    'idempotency_encrypt_key ../html/new.key ../html/old.key',
                    'proxy_pass http://backend')
--- request
POST /enc/5
x
--- more_headers
Idempotency-Key: enc-5
--- error_code: 201
--- response_headers
X-Upstream-Execution: 1
Idempotent-Replayed: true


=== TEST 7: once the old key is dropped, its records no longer open: 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/new.key',
                    'proxy_pass http://backend')
--- request
POST /enc/5
x
--- more_headers
Idempotency-Key: enc-5
--- error_code: 410
--- error_log
sealed with a key that is not configured


=== TEST 8: a record stored before encryption was turned on ...
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /enc/8
x
--- more_headers
Idempotency-Key: enc-8
--- error_code: 201


=== TEST 9: ... is refused once it is on: 410, never replayed unauthenticated
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_pass http://backend')
--- request
POST /enc/8
x
--- more_headers
Idempotency-Key: enc-8
--- error_code: 410
--- error_log
is not encrypted, as idempotency_encrypt_key requires


=== TEST 10: a key file of the wrong size is refused by nginx -t, naming the directive
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/short.key',
                    'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_encrypt_key":
must hold a 32-byte key


=== TEST 11: a missing key file is refused by nginx -t
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/absent.key',
                    'proxy_pass http://backend')
--- must_die
--- error_log
"idempotency_encrypt_key": cannot open


=== TEST 12: an upstream that resets mid-body: the worker survives, the retry gets 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
my $sock = IdempotencyTest::send_request(
    "POST /enc/12?size=200000&reset=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Idempotency-Key: enc-12\r\nContent-Length: 1\r\n\r\nx");
my $got = '';
1 while sysread($sock, $got, 65536, length $got);
close $sock;
IdempotencyTest::wait_until(sub {
    defined IdempotencyTest::redis_command('GET', IdempotencyTest::redis_key('enc-12'))
        && IdempotencyTest::redis_command('PTTL', IdempotencyTest::redis_key('enc-12')) > 60_000
}, 10) or die "the broken exchange left no record\n";
--- request eval
["POST /enc/12?size=200000&reset=1\nx", "GET /_count/enc/12"]
--- more_headers eval
["Idempotency-Key: enc-12", ""]
--- error_code eval
[410, 200]
--- response_body_like eval
[qr/"status":410/, qr/\A1\z/]
--- no_error_log
exited on signal


=== TEST 13: a read timeout after the headers: the worker survives, the retry gets 410
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/old.key',
                    'proxy_read_timeout 300ms', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
my $sock = IdempotencyTest::send_request(
    "POST /enc/13?size=4000&trickle=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Idempotency-Key: enc-13\r\nContent-Length: 1\r\n\r\nx");
my $got = '';
1 while sysread($sock, $got, 65536, length $got);
close $sock;
IdempotencyTest::wait_until(sub {
    defined IdempotencyTest::redis_command('GET', IdempotencyTest::redis_key('enc-13'))
        && IdempotencyTest::redis_command('PTTL', IdempotencyTest::redis_key('enc-13')) > 60_000
}, 10) or die "the broken exchange left no record\n";
--- request eval
["POST /enc/13?size=4000&trickle=1\nx", "GET /_count/enc/13"]
--- more_headers eval
["Idempotency-Key: enc-13", ""]
--- error_code eval
[410, 200]
--- response_body_like eval
[qr/"status":410/, qr/\A1\z/]
--- no_error_log
exited on signal


=== TEST 14: stored sealed, for the two cases after it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_encrypt_key ../html/old.key')
--- request eval
["POST /enc/14\nx", "POST /enc/15\nx"]
--- more_headers eval
["Idempotency-Key: enc-14", "Idempotency-Key: enc-15"]
--- error_code eval
[201, 201]


=== TEST 15: a sealed record cut short in Redis is a record of ours, damaged: 410, never 503
--- init
my $rkey = IdempotencyTest::redis_key('enc-14');
my $value = IdempotencyTest::redis_command('GET', $rkey);
die "not sealed\n" unless defined $value && substr($value, 0, 4) eq "IDE\x01";
IdempotencyTest::redis_command('SET', $rkey, substr($value, 0, 20));
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_encrypt_key ../html/old.key')
--- request
POST /enc/14
x
--- more_headers
Idempotency-Key: enc-14
--- error_code: 410
--- response_headers
Content-Type: application/problem+json
X-Idempotency-Status: unreplayable
!Retry-After
--- response_body_like: "type":"[^"]*response-unverifiable"
--- error_log
does not open: altered


=== TEST 16: a sealed record whose magic was altered: 410, never 503
--- init
my $rkey = IdempotencyTest::redis_key('enc-15');
my $value = IdempotencyTest::redis_command('GET', $rkey);
die "not sealed\n" unless defined $value && substr($value, 0, 4) eq "IDE\x01";
substr($value, 0, 1) = 'X';
IdempotencyTest::redis_command('SET', $rkey, $value);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_encrypt_key ../html/old.key')
--- request
POST /enc/15
x
--- more_headers
Idempotency-Key: enc-15
--- error_code: 410
--- response_headers
X-Idempotency-Status: unreplayable
--- response_body_like: "type":"[^"]*response-unverifiable"
--- error_log
does not open: altered


=== TEST 17: ... neither retry was executed again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/_count/', 'proxy_pass http://backend')
--- request eval
["GET /_count/enc/14", "GET /_count/enc/15"]
--- response_body eval
["1", "1"]


=== TEST 18: another application's value under the key is not ours: 503 with Retry-After
--- init
IdempotencyTest::redis_command('SET', IdempotencyTest::redis_key('enc-17'), 'x' x 64);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_encrypt_key ../html/old.key')
--- request
POST /enc/17
x
--- more_headers
Idempotency-Key: enc-17
--- error_code: 503
--- response_headers_like
Retry-After: \d+
--- error_log
not a record of this module
