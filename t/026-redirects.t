# The request is followed (docs/design.md#redirects-followed): after an
# internal redirect — try_files, rewrite ... last, error_page to a named
# location, X-Accel-Redirect — the location that finally answers keeps the
# claim, the capture and the client-gone protection of rule 4: a client that
# leaves there still gets the replay on retry, never a second execution.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

# Sends a POST with the key, leaves before the answer, and waits until the
# module has stored the response.
sub leave_early {
    my ($uri, $key) = @_;
    my $client = IdempotencyTest::send_request(
        "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 10\r\n\r\namount=100");
    close $client;
    IdempotencyTest::wait_until(sub {
        (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq 'response'
    }, 10);
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: try_files to a named location: the client leaves, its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'try_files /nonexistent @app')
. main::location_conf('@app', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::leave_early('/v1/tf?sleep=1', 'redirect-1');
--- request eval
["POST /v1/tf?sleep=1\namount=100", "GET /_count/v1/tf"]
--- more_headers eval
["Idempotency-Key: redirect-1", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 2: rewrite ... last to the proxying location: the client leaves, its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
idempotency on;
location /v1/ {
    rewrite ^/v1/(.*)$ /internal/$1 last;
}
location /internal/ {
    internal;
    proxy_pass http://backend;
}
location /_count/ {
    idempotency off;
    proxy_pass http://backend;
}
--- init
main::leave_early('/v1/rw?sleep=1', 'redirect-2');
--- request eval
["POST /v1/rw?sleep=1\namount=100", "GET /_count/internal/rw"]
--- more_headers eval
["Idempotency-Key: redirect-2", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 3: error_page 404 = @app after a static miss: the client leaves, its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'log_not_found off', 'error_page 404 = @app')
. main::location_conf('@app', 'proxy_pass http://backend')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::leave_early('/v1/ep?sleep=1', 'redirect-3');
--- request eval
["POST /v1/ep?sleep=1\namount=100", "GET /_count/v1/ep"]
--- more_headers eval
["Idempotency-Key: redirect-3", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 4: X-Accel-Redirect to a slow internal location: the client leaves, its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'proxy_pass http://backend')
. main::location_conf('= /xa-target', 'internal', 'proxy_pass http://backend/xa-target?sleep=1')
. main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
main::leave_early('/v1/xa?header=X-Accel-Redirect:/xa-target', 'redirect-4');
--- request eval
["POST /v1/xa?header=X-Accel-Redirect:/xa-target\namount=100", "GET /_count/v1/xa", "GET /_count/xa-target"]
--- more_headers eval
["Idempotency-Key: redirect-4", "", ""]
--- error_code eval
[201, 200, 200]
--- response_headers eval
["Idempotent-Replayed: true\nX-Upstream-Execution: 1", "", ""]
--- response_body_like eval
[qr/"path":"\/xa-target"/, qr/\A1\z/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 5: a replay reached through try_files is what the first client got
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'try_files /nonexistent @app')
. main::location_conf('@app', 'proxy_pass http://backend')
--- request eval
["POST /v1/tf5?cookies=2\nx", "POST /v1/tf5?cookies=2\nx"]
--- more_headers
Idempotency-Key: redirect-5
--- error_code eval
[201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- response_body_like eval
[qr/"execution":1,/, qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 6: a request without a key followed to a named location stays missing, counted once
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'try_files /nonexistent @app')
. main::location_conf('@app', 'idempotency on', 'idempotency_required on',
                      'add_header X-Idempotency-Status $idempotency_status always',
                      'proxy_pass http://backend')
. main::location_conf('= /metrics', 'idempotency_metrics')
--- request eval
["POST /v1/nokey6\nx", "GET /metrics"]
--- error_code eval
[201, 200]
--- response_headers eval
["X-Idempotency-Status: missing\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/^idempotency_requests_total\{outcome="missing"\} 1$/m]
--- no_error_log
[error]
