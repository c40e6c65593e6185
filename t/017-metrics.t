# idempotency_metrics: Prometheus text with requests by outcome, Redis
# commands, errors, timeouts, reconnects, round-trip and waiting histograms
# and bytes stored, duplicates whose wait ran out, aggregated across workers.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf metered_location);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: counts by outcome after new, replayed, mismatch, missing and invalid requests
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::metered_location()
--- request eval
["POST /m/1\nx", "POST /m/1\nx", "POST /m/1\ny", "POST /m/1\nx", "POST /m/1\nx", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: m-1", "Idempotency-Key: m-1", "Idempotency-Key: m-1", "", "Idempotency-Key: \"m", ""]
--- error_code eval
[201, 201, 422, 201, 400, 200]
--- response_headers eval
["", "", "", "", "", "Content-Type: text/plain; version=0.0.4"]
--- response_body_like eval
[qr//, qr//, qr//, qr//, qr//, qr/
    (?=.*^idempotency_requests_total\{outcome="new"\}\ 1$)
    (?=.*^idempotency_requests_total\{outcome="replayed"\}\ 1$)
    (?=.*^idempotency_requests_total\{outcome="mismatch"\}\ 1$)
    (?=.*^idempotency_requests_total\{outcome="missing"\}\ 1$)
    (?=.*^idempotency_requests_total\{outcome="invalid"\}\ 1$)
    (?=.*^idempotency_requests_total\{outcome="conflict"\}\ 0$)
    (?=.*^idempotency_stored_responses_total\ 1$)
    (?=.*^idempotency_stored_bytes_total\ [1-9][0-9]*$)
    (?=.*^\#\ TYPE\ idempotency_redis_rtt_seconds\ histogram$)
    (?=.*^idempotency_redis_rtt_seconds_bucket\{le="\+Inf"\}\ (?:9|1[0-4])$)
    (?=.*^idempotency_redis_rtt_seconds_count\ (?:9|1[0-4])$)
    (?=.*^idempotency_redis_commands_total\ (?:9|1[0-4])$)
    (?=.*^idempotency_wait_seconds_count\ 0$)
/msx]


=== TEST 2: a request answered 503 because Redis is unreachable is counted as unavailable
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
--- config eval
main::metered_location()
--- request eval
["POST /m/2\nx", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: m-2", ""]
--- error_code eval
[503, 200]
--- response_body_like eval
[qr/"status":503/, qr/^idempotency_requests_total\{outcome="unavailable"\} 1$/m]


=== TEST 3: only GET and HEAD
--- config eval
main::location_conf('= /metrics', 'idempotency_metrics')
--- request
POST /metrics
x
--- error_code: 405


=== TEST 4: a duplicate whose idempotency_wait runs out with the original in flight is counted as a wait timeout
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::metered_location('idempotency_wait 300ms')
--- init
$main::original = IdempotencyTest::start_in_flight('/m/4?sleep=3', 'm-4');
--- request eval
["POST /m/4?sleep=3\nx", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: m-4", ""]
--- error_code eval
[409, 200]
--- response_body_like eval
[qr//, qr/
    (?=.*^\#\ TYPE\ idempotency_wait_timeouts_total\ counter$)
    (?=.*^idempotency_wait_timeouts_total\ 1$)
    (?=.*^idempotency_requests_total\{outcome="conflict"\}\ 1$)
    (?=.*^idempotency_wait_seconds_count\ 0$)
/msx]
