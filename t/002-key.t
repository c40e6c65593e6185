# The idempotency key: a request without one passes through (or gets 400 when
# required), an invalid one gets 400, and the bare and quoted (RFC 8941
# sf-string) spellings of a key name the same key (docs/design.md#no-key,
# #key-syntax).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location counted_location);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

# Every block runs on the test Redis and logs no error; a block without a
# --- config of its own guards "location /" (Idem::Blocks::idem_location).
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('http_config', 'idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;')
        unless defined $block->http_config;
    $block->set_value('config', idem_location()) unless defined $block->config;
    $block->set_value('no_error_log', "[error]\n")
        unless defined $block->no_error_log || defined $block->error_log;
});

# The answers to a key's first request and to its retry.
our @NEW_REPLAYED = ("X-Idempotency-Status: new\nX-Upstream-Execution: 1",
                     "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1");
# A 400 problem document: status, type, title and detail.
our $PROBLEM_400 = qr/\A\{(?=.*"status":400[,}])(?=.*"type":")(?=.*"title":")(?=.*"detail":").*\}\z/s;

run_tests();

__DATA__

=== TEST 1: a request without a key passes through and executes every time
--- request eval
["POST /key/1\nx", "POST /key/1\nx"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: missing\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: missing\nX-Upstream-Execution: 2\n!Idempotent-Replayed"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":2,/]


=== TEST 2: idempotency_required on: no key is a 400 problem, not forwarded
--- config eval
main::counted_location('idempotency_required on')
--- request eval
["POST /key/2\nx", "GET /_count/key/2"]
--- error_code eval
[400, 200]
--- response_headers eval
["Content-Type: application/problem+json\nX-Idempotency-Status: missing", ""]
--- response_body_like eval
[$main::PROBLEM_400, qr/\A0\z/]


=== TEST 3: invalid keys get a 400 problem and are not forwarded
--- config eval
main::counted_location()
--- request eval
[("POST /key/3\nx") x 10, "GET /_count/key/3"]
--- more_headers eval
[
 'Idempotency-Key: ""',                      # empty quoted string
 'Idempotency-Key:',                         # empty value
 'Idempotency-Key: ' . ('k' x 256),          # 256 bytes
 'Idempotency-Key: "' . ('k' x 256) . '"',   # 256 bytes after unquoting
 'Idempotency-Key: two words',               # a space in the bare form
 'Idempotency-Key: "unterminated',           # no closing quote
 'Idempotency-Key: "bad\\escape"',           # only \" and \\ are escapes
 'Idempotency-Key: "abc";param=1',           # parameters after the string
 "Idempotency-Key: caf\xc3\xa9",             # bytes outside visible ASCII
 "Idempotency-Key: twice\nIdempotency-Key: twice",   # the header twice
 '',
]
--- error_code eval
[(400) x 10, 200]
--- response_headers eval
[("Content-Type: application/problem+json\nX-Idempotency-Status: invalid") x 10, ""]
--- response_body_like eval
[($main::PROBLEM_400) x 10, qr/\A0\z/]


=== TEST 4: a 255-byte key is accepted, bare or quoted (the limit is after unquoting)
--- request eval
["POST /key/4\nx", "POST /key/4\nx"]
--- more_headers eval
['Idempotency-Key: ' . ('L' x 255), 'Idempotency-Key: "' . ('L' x 255) . '"']
--- error_code eval
[201, 201]
--- response_headers eval
[@main::NEW_REPLAYED]


=== TEST 5: "abc" and abc name the same key; spaces are allowed inside the quotes
--- request eval
["POST /key/5\nx", "POST /key/5\nx", "POST /key/5b\nx", "POST /key/5b\nx"]
--- more_headers eval
['Idempotency-Key: "quoted-5"', 'Idempotency-Key: quoted-5',
 'Idempotency-Key: "pay ment 5"', 'Idempotency-Key: "pay ment 5"']
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
[(@main::NEW_REPLAYED) x 2]


=== TEST 6: escapes: "a\"b" is the bare a"b and "a\\b" the bare a\b
--- request eval
["POST /key/6\nx", "POST /key/6\nx", "POST /key/6b\nx", "POST /key/6b\nx"]
--- more_headers eval
['Idempotency-Key: "esc\\"6"', 'Idempotency-Key: esc"6',
 'Idempotency-Key: "esc\\\\6"', 'Idempotency-Key: esc\\6']
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
[(@main::NEW_REPLAYED) x 2]


=== TEST 7: idempotency_header PayPal-Request-Id reads the key from that header only
--- config eval
main::idem_location('idempotency_header PayPal-Request-Id')
--- request eval
["POST /key/7\nx", "POST /key/7\nx", "POST /key/7b\nx", "POST /key/7b\nx"]
--- more_headers eval
['PayPal-Request-Id: paypal-7', 'PayPal-Request-Id: paypal-7',
 'Idempotency-Key: paypal-7b', 'Idempotency-Key: paypal-7b']
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
[@main::NEW_REPLAYED,
 "X-Idempotency-Status: missing\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: missing\nX-Upstream-Execution: 2\n!Idempotent-Replayed"]


=== TEST 8: idempotency_methods PUT protects PUT and leaves POST untouched
--- config eval
main::idem_location('idempotency_methods PUT')
--- request eval
["PUT /key/8\nx", "PUT /key/8\nx", "POST /key/8b\nx", "POST /key/8b\nx"]
--- more_headers eval
['Idempotency-Key: methods-8', 'Idempotency-Key: methods-8',
 'Idempotency-Key: methods-8b', 'Idempotency-Key: methods-8b']
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
[@main::NEW_REPLAYED,
 "!X-Idempotency-Status\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "!X-Idempotency-Status\nX-Upstream-Execution: 2\n!Idempotent-Replayed"]


=== TEST 9: the key header's name matches in any case
--- request eval
["POST /key/9\nx", "POST /key/9\nx"]
--- more_headers eval
['idempotency-key: case-9', 'IDEMPOTENCY-KEY: case-9']
--- error_code eval
[201, 201]
--- response_headers eval
[@main::NEW_REPLAYED]
