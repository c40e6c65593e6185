# HTTP/2 clients (docs/design.md#client-leaves): over an h2c listener (prior knowledge), a first request
# executes, its retry gets the replay, and a client that resets its stream
# before the answer still gets the replay on retry, one execution.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_H2_PORT} = IdempotencyTest::free_port();

# One POST over HTTP/2 to the h2c listener, with the key.
sub h2_post {
    my ($uri, $key, $max_time, @curl) = @_;
    return IdempotencyTest::h2_post($ENV{TEST_NGINX_H2_PORT}, $uri, key => $key, body => 'amount=100',
                                    max_time => $max_time, curl => \@curl);
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: over HTTP/2: the first request executes, the retry is replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location /v1/ {
        idempotency on;
        proxy_pass http://backend;
    }
}
--- config
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $first = main::h2_post('/v1/h2/1', 'h2-1');
Test::More::is($first->{status}, 201, 'TEST 1: HTTP/2 first request: 201');
Test::More::ok(!exists $first->{headers}{'idempotent-replayed'}, 'TEST 1: the first answer is not a replay');
my $retry = main::h2_post('/v1/h2/1', 'h2-1');
Test::More::is($retry->{status}, 201, 'TEST 1: HTTP/2 retry: 201');
Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', 'TEST 1: the retry is a replay');
Test::More::is($retry->{body}, $first->{body}, 'TEST 1: the replayed body is the first body');
--- request
GET /_count/v1/h2/1
--- response_body: 1


=== TEST 2: over HTTP/2: the client gives up before the answer, its retry gets the replay
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location /v1/ {
        idempotency on;
        proxy_pass http://backend;
    }
}
--- config
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $gone = main::h2_post('/v1/h2/2?sleep=1', 'h2-2', 0.3);
Test::More::is($gone->{exit}, 28, 'TEST 2: the client gave up (curl timed out)');
IdempotencyTest::wait_until(sub {
    (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('h2-2', '', undef, '')) // '') eq 'response'
}, 10) or die "the response of the abandoned stream was not stored\n";
my $retry = main::h2_post('/v1/h2/2?sleep=1', 'h2-2');
Test::More::is($retry->{status}, 201, 'TEST 2: HTTP/2 retry: 201');
Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', 'TEST 2: the retry is a replay');
Test::More::like($retry->{body}, qr/"execution":1,/, 'TEST 2: of the first execution');
--- request
GET /_count/v1/h2/2
--- response_body: 1


=== TEST 3: over HTTP/2: a large response, the client gives up mid-body, its retry gets all of it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 4m;
        proxy_pass http://backend;
    }
}
--- config
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $gone = main::h2_post('/v1/h2/3?size=2000000&trickle=0.4', 'h2-3', 0.5);
Test::More::is($gone->{exit}, 28, 'TEST 3: the client gave up mid-body (curl timed out)');
IdempotencyTest::wait_until(sub {
    (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('h2-3', '', undef, '')) // '') eq 'response'
}, 10) or die "the response of the abandoned stream was not stored\n";
my $retry = main::h2_post('/v1/h2/3?size=2000000&trickle=0.4', 'h2-3');
Test::More::is($retry->{status}, 201, 'TEST 3: HTTP/2 retry: 201');
Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', 'TEST 3: the retry is a replay');
Test::More::is(length $retry->{body}, 2000000, 'TEST 3: the whole body');
--- request
GET /_count/v1/h2/3
--- response_body: 1


=== TEST 4: over HTTP/2: the client stops reading, send_timeout fires, its retry gets all of it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location /v1/ {
        idempotency on;
        idempotency_max_response_size 16m;
        send_timeout 500ms;
        proxy_pass http://backend;
    }
}
--- config
location /_count/ {
    proxy_pass http://backend;
}
--- init
my $slow = main::h2_post('/v1/h2/4?size=6000000', 'h2-4', 4, '--limit-rate', '2k');
Test::More::isnt($slow->{exit}, 0, 'TEST 4: the slow client did not get everything');
IdempotencyTest::wait_until(sub {
    (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('h2-4', '', undef, '')) // '') eq 'response'
}, 10) or die "the response of the stalled stream was not stored\n";
my $retry = main::h2_post('/v1/h2/4?size=6000000', 'h2-4');
Test::More::is($retry->{status}, 201, 'TEST 4: HTTP/2 retry: 201');
Test::More::is($retry->{headers}{'idempotent-replayed'}, 'true', 'TEST 4: the retry is a replay');
Test::More::is(length $retry->{body}, 6000000, 'TEST 4: the whole body');
--- request
GET /_count/v1/h2/4
--- response_body: 1
