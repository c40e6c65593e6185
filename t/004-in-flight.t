# A duplicate that arrives while the original is still running upstream gets
# 409 with Retry-After (or, with idempotency_wait, waits for the original and
# gets its replay); once the original is done, retries get the replay
# (docs/design.md#in-flight).
#
# The original is sent from `--- init` (on a socket kept open, so its client
# stays); blocks without `--- config` run on the same nginx, so the original
# can finish there.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location counted_location);
use Test::Nginx::Socket 'no_plan';

use IO::Select;
use Time::HiRes qw(time);

test_nginx_defaults();
run_tests();

# Reads the original's response (its connection is kept alive) to its last
# byte, by its Content-Length, and closes the connection; returns the status.
sub finish_original {
    my ($sock) = @_;
    my ($buf, $sel, $deadline) = ('', IO::Select->new($sock), time + 10);
    while (time < $deadline) {
        if ($buf =~ /\A(HTTP\/1\.\d (\d{3}).*?\r\n)\r\n/s) {
            my ($head, $status) = ($1, $2);
            my ($length) = $head =~ /^Content-Length:\s*(\d+)/mi;
            die "the original's response has no Content-Length\n" unless defined $length;
            if (length($buf) >= length($head) + 2 + $length) {
                close $sock;
                return $status;
            }
        }
        next unless $sel->can_read($deadline - time);
        sysread($sock, $buf, 65536, length $buf) or last;
    }
    die "the original's response did not come in full\n";
}

__DATA__

=== TEST 1: a duplicate of a request still in flight gets 409 with Retry-After
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location()
--- init
$main::original = IdempotencyTest::start_in_flight('/flight/1?sleep=2', 'flight-1');
--- request eval
["POST /flight/1?sleep=2\nx", "GET /_count/flight/1"]
--- more_headers eval
["Idempotency-Key: flight-1", ""]
--- error_code eval
[409, 200]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nRetry-After: [1-9][0-9]*\nX-Idempotency-Status: conflict", ""]
--- response_body_like eval
[qr/\A\{(?=.*"status":409[,}])(?=.*"type":")(?=.*"title":")(?=.*"detail":").*\}\z/s, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 2: once the original has finished, the retry gets its response
--- init
main::finish_original($main::original) == 201 or die "the original of flight-1 failed\n";
Idem::Store::stored('flight-1', 'response') or die "the response to flight-1 was not stored\n";
--- request
POST /flight/1?sleep=2
x
--- more_headers
Idempotency-Key: flight-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- response_body_like: "execution":1,
--- no_error_log
[error]


=== TEST 3: with idempotency_wait, the duplicate waits and gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::counted_location('idempotency_wait 5s')
--- init
$main::original = IdempotencyTest::start_in_flight('/flight/3?sleep=1', 'flight-3');
--- request eval
["POST /flight/3?sleep=1\nx", "GET /_count/flight/3"]
--- more_headers eval
["Idempotency-Key: flight-3", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["X-Idempotency-Status: waited\nIdempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 4: a duplicate that outwaits idempotency_wait gets 409
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 300ms')
--- init
close $main::original if $main::original;
$main::original = IdempotencyTest::start_in_flight('/flight/4?sleep=1', 'flight-4');
--- request
POST /flight/4?sleep=1
x
--- more_headers
Idempotency-Key: flight-4
--- error_code: 409
--- response_headers_like
Retry-After: [1-9][0-9]*
X-Idempotency-Status: conflict
--- no_error_log
[error]


=== TEST 5: ... and its retry after the original finished gets the replay
--- init
main::finish_original($main::original) == 201 or die "the original of flight-4 failed\n";
Idem::Store::stored('flight-4', 'response') or die "the response to flight-4 was not stored\n";
--- request
POST /flight/4?sleep=1
x
--- more_headers
Idempotency-Key: flight-4
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
