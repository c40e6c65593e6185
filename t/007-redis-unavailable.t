# When Redis cannot be used (unreachable, slower than idempotency_redis_timeout,
# answering an error) a protected request gets 503 with Retry-After and is
# not forwarded, or is forwarded unprotected with idempotency_fail_open on;
# the module reconnects by itself when Redis is back (docs/design.md#store-unavailable).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf counted_location);
use Test::Nginx::Socket 'no_plan';

use Time::HiRes ();

test_nginx_defaults();
run_tests();

# The ids of the Redis clients that are not this test's own connection:
# the gateway's.
sub gateway_clients {
    my $list = IdempotencyTest::redis_command('CLIENT', 'LIST');
    return join ' ', sort map { /\bid=(\d+)/ ? $1 : () } grep { !/cmd=client\|list/ } split /\n/, $list;
}

# Redis stalls (CLIENT PAUSE) for 3 s, past the deadline of a request sent
# as it begins (idempotency_redis_timeout 2s) but not of one sent 1.6 s in:
# the first gets 503, the second its answer on the same connection, which
# is not reopened. (The gap between the two is the scenario itself.)
sub two_ages {
    Test::More::is(IdempotencyTest::nginx_post('/age/warm', 'age-warm'), 201, 'the connection is up');
    my $before = gateway_clients();
    IdempotencyTest::redis_command('CLIENT', 'PAUSE', 3000, 'ALL');
    my $t0 = Time::HiRes::time();
    my $old = IdempotencyTest::send_request("POST /age/old HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                                            . "Idempotency-Key: age-old\r\nContent-Length: 1\r\n\r\nx");
    Time::HiRes::sleep(1.6 - (Time::HiRes::time() - $t0));
    my $young = IdempotencyTest::send_request("POST /age/young HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                                              . "Idempotency-Key: age-young\r\nContent-Length: 1\r\n\r\nx");
    my $o = IdempotencyTest::read_response($old);
    my $y = IdempotencyTest::read_response($young);
    Test::More::is("$o->{status} " . ($o->{headers}{'x-idempotency-status'} // '-'), '503 unavailable',
                   'the request whose deadline passed in the stall: 503');
    Test::More::is("$y->{status} " . ($y->{headers}{'x-idempotency-status'} // '-'), '201 new',
                   'the one whose deadline had not: its answer');
    Test::More::is(gateway_clients(), $before, 'on the same connection: it was not reopened');
}

__DATA__

=== TEST 1: Redis unreachable: 503 problem with Retry-After, the upstream is not contacted
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::counted_location()
--- request eval
["POST /down/1\nx", "GET /_count/down/1"]
--- more_headers eval
["Idempotency-Key: down-1", ""]
--- error_code eval
[503, 200]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nRetry-After: [1-9][0-9]*\nX-Idempotency-Status: unavailable", ""]
--- response_body_like eval
[qr/\A\{(?=.*"status":503[,}])(?=.*"type":")(?=.*"title":")(?=.*"detail":").*\}\z/s, qr/\A0\z/]


=== TEST 2: idempotency_fail_open on: forwarded unprotected
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::idem_location('idempotency_fail_open on')
--- request eval
["POST /down/2\nx", "POST /down/2\nx"]
--- more_headers
Idempotency-Key: down-2
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: unavailable\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: unavailable\nX-Upstream-Execution: 2\n!Idempotent-Replayed"]


=== TEST 3: idempotency_fail_open on: the forwarding is logged as a warning (at most once a second)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_fail_open on', 'proxy_pass http://backend')
--- request
POST /down/logged
x
--- more_headers
Idempotency-Key: down-logged
--- error_code: 201
--- error_log eval
qr/\[warn\] .*idempotency: store unavailable, forwarding requests unprotected/


=== TEST 4: Redis answering an error: 503, not forwarded
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location()
--- init
# a list where the record should be: every command on it is a WRONGTYPE error
IdempotencyTest::redis_command('RPUSH', IdempotencyTest::redis_key('down-3'), 'not a record');
--- request eval
["POST /down/3\nx", "GET /_count/down/3"]
--- more_headers eval
["Idempotency-Key: down-3", ""]
--- error_code eval
[503, 200]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nRetry-After: [1-9][0-9]*\nX-Idempotency-Status: unavailable", ""]
--- response_body_like eval
[qr/"status":503[,}]/, qr/\A0\z/]


=== TEST 5: Redis slower than idempotency_redis_timeout: 503, not forwarded
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location('idempotency_redis_timeout 200ms')
--- init
IdempotencyTest::redis_command('CLIENT', 'PAUSE', 1000, 'ALL');
--- request eval
["POST /slow/4\nx", "GET /_count/slow/4"]
--- more_headers eval
["Idempotency-Key: slow-4", ""]
--- error_code eval
[503, 200]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nRetry-After: [1-9][0-9]*\nX-Idempotency-Status: unavailable", ""]
--- response_body_like eval
[qr/"status":503[,}]/, qr/\A0\z/]


=== TEST 6: ... once Redis answers again, the late claim does not hold off the retry
--- init
IdempotencyTest::redis_command('PING');    # returns when the pause is over
# The pause outlasted twice the timeout: the worker dropped its connection
# and rests (up to a second) before it connects again, answering 503 until
# then. Requests of other keys show when it takes claims again.
my $probe = 0;
IdempotencyTest::wait_until(sub { $probe++; IdempotencyTest::nginx_post("/slow/probe-$probe", "slow-probe-$probe") == 201 }, 10)
    or die "the gateway did not take claims again after the pause\n";
# give a claim that reached Redis late the time to be released
IdempotencyTest::wait_until(sub {
    (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('slow-4')) // '') ne 'claim'
}, 3);
--- request eval
["POST /slow/4\nx", "POST /slow/4\nx"]
--- more_headers
Idempotency-Key: slow-4
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 7: with Redis up, a request is protected as usual
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location()
--- request
POST /flap/6
x
--- more_headers
Idempotency-Key: flap-6
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- no_error_log
[error]


=== TEST 8: Redis stopped: 503, not forwarded
--- init
IdempotencyTest::stop_redis();
--- request eval
["POST /flap/7\nx", "GET /_count/flap/7"]
--- more_headers eval
["Idempotency-Key: flap-7", ""]
--- error_code eval
[503, 200]
--- response_headers_like eval
["Retry-After: [1-9][0-9]*\nX-Idempotency-Status: unavailable", ""]
--- response_body_like eval
[qr/"status":503[,}]/, qr/\A0\z/]


=== TEST 9: Redis restarted: the module reconnects by itself; keys are protected again
--- init
IdempotencyTest::start_redis();
# poll through nginx (bounded) until a protected request goes through again
my $probe = 0;
IdempotencyTest::wait_until(sub {
    my $s = IdempotencyTest::send_request("POST /flap/probe HTTP/1.0\r\n"
        . "Idempotency-Key: probe-" . ++$probe . "\r\nContent-Length: 1\r\n\r\nx");
    my $response = do { local $/; <$s> } // '';
    close $s;
    $response =~ m{\AHTTP/1\.\d 201 };
}, 10);
--- request eval
["POST /flap/8\nx", "POST /flap/8\nx"]
--- more_headers
Idempotency-Key: flap-8
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 10: one slow reply costs its own request alone: Redis stalls past an older request's deadline, not a younger one's, which gets its answer on the same connection
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location('idempotency_redis_timeout 2s')
--- init
main::two_ages();
--- request eval
["GET /_count/age/old", "GET /_count/age/young"]
--- response_body eval
["0", "1"]
--- timeout: 20
