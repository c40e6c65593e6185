# The fingerprint made of the parts a location chooses (idempotency_fingerprint,
# docs/design.md#what-a-fingerprint-is-made-of): JSON compared as data (members
# in any order, whitespace, numbers and escapes as values), members chosen or
# left out by JSON Pointer, form fields and query arguments as sets, nginx
# variables; a body that cannot be read so gets 400 or stands as its raw
# bytes, as the operator chose; the default digest is the one of the
# release before; nginx -t refuses bad values naming the directive.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location counted_location location_conf);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: canonical JSON: the same members in another order, with other whitespace, are replayed; another amount is 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json')
--- request eval
["POST /fp/1\n{\"amount\":100,\"currency\":\"EUR\",\"meta\":{\"a\":1,\"b\":[1,2]}}",
 "POST /fp/1\n{ \"meta\" : { \"b\" : [ 1, 2 ], \"a\" : 1 },\n  \"currency\" : \"EUR\",\t\"amount\" : 100 }\n",
 "POST /fp/1\n{\"amount\":200,\"currency\":\"EUR\",\"meta\":{\"a\":1,\"b\":[1,2]}}"]
--- more_headers
Idempotency-Key: parts-order
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/, qr/"status":422[,}]/]
--- no_error_log
[error]


=== TEST 2: canonical JSON: numbers compared as values (1.0 and 1, 1e2 and 100, 0.50 and 5E-1), but 1.5 is another amount
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json')
--- request eval
["POST /fp/2\n{\"amount\":1.0,\"fee\":1e2,\"rate\":0.50}",
 "POST /fp/2\n{\"fee\":100,\"rate\":5E-1,\"amount\":1}",
 "POST /fp/2\n{\"fee\":100,\"rate\":0.5,\"amount\":1.5}"]
--- more_headers
Idempotency-Key: parts-numbers
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 3: canonical JSON: escapes compared as the characters they stand for ("\u00e9" and "é", "\/" and "/")
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json')
--- request eval
["POST /fp/3\n{\"name\":\"Ren\\u00e9\",\"url\":\"a\\/b\"}",
 "POST /fp/3\n{\"url\":\"a/b\",\"name\":\"Ren\xc3\xa9\"}",
 "POST /fp/3\n{\"url\":\"a/b\",\"name\":\"Rene\"}"]
--- more_headers
Idempotency-Key: parts-unicode
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 4: a member named twice is 400 (problem+json saying so), never forwarded
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location('idempotency_fingerprint method uri body=json')
--- request eval
["POST /fp/4\n{\"amount\":100,\"amount\":200}", "GET /_count/fp/4"]
--- more_headers
Idempotency-Key: parts-duplicate
--- error_code eval
[400, 200]
--- response_headers eval
["X-Idempotency-Status: invalid\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/\A\{(?=.*"type":"urn:nginx-idempotency:problem:body-unreadable")(?=.*"status":400[,}])(?=.*member twice).*\}\z/s,
 qr/\A0\z/]
--- no_error_log
[error]


=== TEST 5: the 400 is logged at info, with why
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json')
--- request
POST /fp/5
{"amount":100,"amount":200}
--- more_headers
Idempotency-Key: parts-duplicate-logged
--- error_code: 400
--- error_log eval
qr/\[info\] .*the request is unreadable for its fingerprint: a JSON member named twice/


=== TEST 6: unreadable=raw: a body with a member named twice stands as its bytes: the same bytes replay, the members reordered are 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json unreadable=raw')
--- request eval
["POST /fp/5b\n{\"a\":1,\"a\":2}", "POST /fp/5b\n{\"a\":1,\"a\":2}", "POST /fp/5b\n{\"a\":2,\"a\":1}"]
--- more_headers
Idempotency-Key: parts-raw-fallback
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 7: nesting deeper than max_depth is 400 (the body is depth 1, {"c":1}'s 1 depth 2); within it the body is read
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json max_depth=4')
--- request eval
["POST /fp/6\n{\"a\":{\"b\":{\"c\":{\"d\":1}}}}", "POST /fp/6\n{\"a\":{\"b\":{\"c\":1}}}", "POST /fp/6\n{ \"a\": {\"b\": {\"c\": 1}} }"]
--- more_headers
Idempotency-Key: parts-deep
--- error_code eval
[400, 201, 201]
--- response_headers eval
["X-Idempotency-Status: invalid", "X-Idempotency-Status: new", "X-Idempotency-Status: replayed"]
--- response_body_like eval
[qr/"detail":"[^"]*nests arrays and objects deeper/, qr/"execution":1,/, qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 8: a body that is not JSON is 400; a body over max_size is 400
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json max_size=32')
--- request eval
["POST /fp/7\namount=100",
 "POST /fp/7\n{\"amount\":100,\"note\":\"longer than thirty-two bytes\"}",
 "POST /fp/7\n{\"amount\":100}"]
--- more_headers
Idempotency-Key: parts-not-json
--- error_code eval
[400, 400, 201]
--- response_headers eval
["X-Idempotency-Status: invalid\nContent-Type: application/problem+json",
 "X-Idempotency-Status: invalid\nContent-Type: application/problem+json",
 "X-Idempotency-Status: new"]
--- response_body_like eval
[qr/"detail":"[^"]*is not one JSON text/, qr/"detail":"[^"]*is larger than/, qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 9: except=/sent_at: a retry that differs only in the excluded members is replayed; one with another amount is 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json except=/sent_at except=/meta/trace')
--- request eval
["POST /fp/8\n{\"amount\":100,\"sent_at\":\"12:00:00\",\"meta\":{\"trace\":\"t-1\",\"order\":7}}",
 "POST /fp/8\n{\"sent_at\":\"12:00:05\",\"amount\":100,\"meta\":{\"order\":7,\"trace\":\"t-2\"}}",
 "POST /fp/8\n{\"amount\":100,\"meta\":{\"order\":7}}",
 "POST /fp/8\n{\"amount\":101,\"sent_at\":\"12:00:00\",\"meta\":{\"trace\":\"t-1\",\"order\":7}}"]
--- more_headers
Idempotency-Key: parts-except
--- error_code eval
[201, 201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: replayed",
 "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 10: method, path and two members: other members and the query may differ (replayed); another currency or method is 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method path json=/amount json=/currency')
--- request eval
["POST /fp/9?attempt=1\n{\"amount\":100,\"currency\":\"EUR\",\"attempt\":1,\"note\":\"first\"}",
 "POST /fp/9?attempt=2\n{\"attempt\":2,\"currency\":\"EUR\",\"amount\":100.0}",
 "POST /fp/9?attempt=3\n{\"amount\":100,\"currency\":\"USD\",\"attempt\":3}",
 "PATCH /fp/9\n{\"amount\":100,\"currency\":\"EUR\"}"]
--- more_headers
Idempotency-Key: parts-members
--- error_code eval
[201, 201, 422, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch",
 "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 11: form fields as a set: another order and other escapes are replayed, another value is 422, a malformed escape 400
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=form')
--- request eval
["POST /fp/10\namount=100&currency=EUR&note=a+b",
 "POST /fp/10\nnote=a%20b&currency=%45UR&amount=100",
 "POST /fp/10\namount=101&currency=EUR&note=a+b",
 "POST /fp/10\namount=100&currency=%ZZ"]
--- more_headers
Idempotency-Key: parts-form
--- error_code eval
[201, 201, 422, 400]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch",
 "X-Idempotency-Status: invalid"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/, qr/"status":422/, qr/"detail":"[^"]*malformed/]
--- no_error_log
[error]


=== TEST 12: query arguments as a set: another order is replayed, another value 422; without the directive another order is 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
my @guarded = ('idempotency on', 'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend');
main::location_conf('/set/', 'idempotency_fingerprint method path args=set body', @guarded)
. main::location_conf('/raw/', @guarded)
--- request eval
["POST /set/11?currency=EUR&amount=100\nx", "POST /set/11?amount=100&currency=EUR\nx", "POST /set/11?amount=100&currency=USD\nx",
 "POST /raw/11?currency=EUR&amount=100\nx", "POST /raw/11?amount=100&currency=EUR\nx"]
--- more_headers eval
["Idempotency-Key: parts-args", "Idempotency-Key: parts-args", "Idempotency-Key: parts-args",
 "Idempotency-Key: parts-args-raw", "Idempotency-Key: parts-args-raw"]
--- error_code eval
[201, 201, 422, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch",
 "X-Idempotency-Status: new", "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 13: a variable as a part: the same tenant header replays, another is 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body $http_x_tenant')
--- request eval
["POST /fp/12\nx", "POST /fp/12\nx", "POST /fp/12\nx"]
--- more_headers eval
["Idempotency-Key: parts-variable\nX-Tenant: acme", "Idempotency-Key: parts-variable\nX-Tenant: acme",
 "Idempotency-Key: parts-variable\nX-Tenant: other"]
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch"]
--- no_error_log
[error]


=== TEST 14: a JSON body in a temporary file is gathered and read: its members reordered are replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"client_body_buffer_size 1k;\n" . main::idem_location('idempotency_fingerprint method uri body=json')
--- request eval
my $items = join ',', map { "{\"sku\":\"sku-$_\",\"quantity\":$_}" } 1 .. 400;
["POST /fp/13\n{\"items\":[$items],\"amount\":100}", "POST /fp/13\n{ \"amount\" : 1e2, \"items\" : [$items] }",
 "POST /fp/13\n{\"items\":[$items],\"amount\":101}"]
--- more_headers
Idempotency-Key: parts-file
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed", "X-Idempotency-Status: mismatch"]
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]


=== TEST 15: the default's parts written out are the default: a record stored without the directive ...
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location()
--- request
POST /fp/14
{"amount":100}
--- more_headers
Idempotency-Key: parts-default
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
--- shared_store


=== TEST 16: ... is replayed by a gateway with "idempotency_fingerprint method uri body" (the same digest)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body')
--- request
POST /fp/14
{"amount":100}
--- more_headers
Idempotency-Key: parts-default
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
X-Upstream-Execution: 1
--- shared_store


=== TEST 17: ... and is 422 under the canonical form (another framing: never mistaken for the default)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json')
--- request
POST /fp/14
{"amount":100}
--- more_headers
Idempotency-Key: parts-default
--- error_code: 422
--- response_headers
X-Idempotency-Status: mismatch
--- shared_store


=== TEST 18: nginx -t: an unknown part
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=xml')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": unknown part "body=xml"/


=== TEST 19: nginx -t: a JSON Pointer that is not one
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method path json=amount')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": a JSON Pointer \(RFC 6901\).*"json=amount"/


=== TEST 20: nginx -t: except= without body=json
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body except=/sent_at')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": "except=" leaves members out of "body=json"/


=== TEST 21: nginx -t: json= beside another body part
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method body=json json=/amount')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": "json=" makes the chosen members the body's part/


=== TEST 22: nginx -t: unreadable= other than 400 or raw
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json unreadable=ignore')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": "unreadable=" must be 400 or raw, not "unreadable=ignore"/


=== TEST 23: nginx -t: max_depth= out of its bounds
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_fingerprint method uri body=json max_depth=0')
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_fingerprint": "max_depth=" must be a number from 1 to 256, not "max_depth=0"/
