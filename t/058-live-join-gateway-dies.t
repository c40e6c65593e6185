# The original's gateway dies mid-stream (SIGKILL: no end is ever written
# to its live log): a duplicate that joined it from another gateway is cut
# off once the log is gone from Redis — it no longer grows, its claim is
# no longer renewed, and it expires with idempotency_lock_ttl — after the
# bytes it had; the retry after the claim expired executes again, the one
# way at-most-once allows for a dead gateway (docs/design.md#live-join,
# docs/design.md#at-most-once).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location);
use Idem::Live;
use Idem::Nginx ();
use Idem::Proc ();
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

sub location { Idem::Blocks::idem_location('idempotency_wait 10s', 'idempotency_lock_ttl 2s', 'proxy_buffering off') }

# The gateway that dies, on the test Redis, its location as the one under test.
sub doomed_gateway {
    return Idem::Nginx::nginx_beside_test('doomed', workers => 1,
        http => "upstream backend { server 127.0.0.1:$ENV{TEST_NGINX_UPSTREAM_PORT}; }\n"
              . 'idempotency_redis 127.0.0.1:' . IdempotencyTest::redis_port() . ';',
        server => "server_name localhost;\n" . location());
}

sub joiner_cut_off_when_the_original_dies {
    my ($key, $gate) = @_;
    my $uri = "/dies/1?sse=4&gate=$gate";
    my $doomed = doomed_gateway();
    my $original = Idem::Live::post($doomed->{port}, $uri, $key);
    $original->body_has('event 1 of 4');
    Idem::Live::open_gate($gate, 2);
    $original->body_has('event 2 of 4');
    my $joiner = Idem::Live::post(IdempotencyTest::nginx_port(), $uri, $key);
    my $head = $joiner->head;
    Test::More::is("$head->{status} $head->{headers}{'x-idempotency-status'}", '201 joined',
                   "$key: the duplicate on the other gateway joins");
    $joiner->body_has('event 2 of 4');
    # the master first: alive, it could log its worker's death before its own
    my @workers = Idem::Nginx::workers_of($doomed->{pid});
    kill 'KILL', $doomed->{pid}, @workers;
    # killed here: nginx_stop's crash sentinel is told to expect it
    Idem::Nginx::allow_log($doomed, qr/^master process $doomed->{pid} had exited before the stop\b/);
    IdempotencyTest::wait_until(sub { !Idem::Proc::running($doomed->{pid}) }, 10);
    my $res = $joiner->finish(20);
    Test::More::ok(!$res->{complete}, "$key: the joiner is cut off once the original's log is gone");
    Test::More::is($res->{body}, join('', map { "id: $_\ndata: event $_ of 4\n\n" } 1 .. 2),
                   "$key: ... after the bytes it had");
    $original->close;
    Idem::Nginx::nginx_stop($doomed);
}

run_tests();

__DATA__

=== TEST 1: the original's gateway dies mid-stream: its joiner on another gateway is cut off once the live log expires, then a retry executes again
--- init
main::joiner_cut_off_when_the_original_dies('dies-1', 'dies1');
IdempotencyTest::wait_until(sub { !defined IdempotencyTest::stored_kind(IdempotencyTest::redis_key('dies-1')) }, 10)
    or die "the dead gateway's claim did not expire\n";
Idem::Live::open_gate('dies1', 4);
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location()
--- request
POST /dies/1?sse=4&gate=dies1
x
--- more_headers
Idempotency-Key: dies-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 2
--- error_log
is gone from the store before its end
