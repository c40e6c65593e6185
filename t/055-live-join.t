# Live joining: a duplicate that arrives while the original's response
# streams gets at once the status, the headers and the bytes sent so far,
# then each further byte as the upstream sends it, and ends when the
# original ends; the upstream runs once (docs/design.md#live-join).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Idem::Live;
use Idem::Nginx ();
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

sub port { IdempotencyTest::nginx_port() }

# An original streams events behind a gate; a duplicate joins after the
# first; both get every event as the gate opens, and the same body.
sub joins_mid_stream {
    my ($path, $key, $gate, $joiner_port) = @_;
    my $uri = "$path?sse=4&gate=$gate";
    my $original = Idem::Live::post(port(), $uri, $key);
    $original->body_has('event 1 of 4');
    my $joiner = Idem::Live::post($joiner_port // port(), $uri, $key);
    my $head = $joiner->head;
    Test::More::is($head->{status}, 201, "$key: the joiner gets the original's status at once");
    Test::More::is($head->{headers}{'x-idempotency-status'}, 'joined', "$key: ... as joined");
    Test::More::is($head->{headers}{'idempotent-replayed'}, 'true', "$key: ... marked replayed");
    Test::More::is($head->{headers}{'content-type'}, 'text/event-stream', "$key: ... with its headers");
    Test::More::like($joiner->body_has('event 1 of 4'), qr/\Aid: 1\n/, "$key: ... and the event sent so far");
    Idem::Live::open_gate($gate, 2);
    $original->body_has('event 2 of 4');
    $joiner->body_has('event 2 of 4');
    Test::More::unlike($joiner->body, qr/event 3/, "$key: the joiner gets event 2 before event 3 exists");
    Idem::Live::open_gate($gate, 4);
    my $first = $original->finish;
    my $joined = $joiner->finish;
    Test::More::ok($first->{complete} && $joined->{complete}, "$key: both responses end whole");
    Test::More::is($joined->{body}, $first->{body}, "$key: the joiner gets the original's bytes");
    Test::More::is(IdempotencyTest::upstream_count($path), 1, "$key: the upstream ran once");
}

# A second gateway on the same Redis, its location as the first's.
sub other_gateway {
    my (@directives) = @_;
    my $redis = IdempotencyTest::redis_port();
    return Idem::Nginx::nginx_start('other', workers => 1,
        http => "upstream backend { server 127.0.0.1:$ENV{TEST_NGINX_UPSTREAM_PORT}; }\n"
              . "idempotency_redis 127.0.0.1:$redis;",
        server => "server_name localhost;\n"
                . Idem::Blocks::idem_location('idempotency_wait 10s', 'proxy_buffering off', @directives));
}

run_tests();

__DATA__

=== TEST 1: a duplicate joins the original's event stream in the same worker, then a retry after the end is replayed
--- init
main::joins_mid_stream('/live/1', 'live-1', 'live1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 10s', 'proxy_buffering off')
--- request
POST /live/1?sse=4&gate=live1
x
--- more_headers
Idempotency-Key: live-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Idempotency-Status: replayed
--- response_body_like: \Aid: 1\ndata: event 1 of 4\n\n.*id: 4\ndata: event 4 of 4\n\n\z


=== TEST 2: a duplicate on another gateway joins through Redis
--- init
my $other = main::other_gateway();
main::joins_mid_stream('/live/2', 'live-2', 'live2', $other->{port});
Idem::Nginx::nginx_stop($other);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_wait 10s', 'proxy_buffering off')
--- request
POST /live/2?sse=4&gate=live2
x
--- more_headers
Idempotency-Key: live-2
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body_like: \Aid: 1\ndata: event 1 of 4\n\n.*id: 4\ndata: event 4 of 4\n\n\z
