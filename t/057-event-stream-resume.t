# Event-stream resume: a retry of an event stream (Content-Type
# text/event-stream) that carries Last-Event-ID, replayed or joined, gets
# only what follows the event that set that id, with the stored status and
# headers; an id no complete event set gets the whole stream, and so does
# any response that is not an event stream (docs/design.md#event-stream-resume).
# Each original is made in --- init on its own key; the block's request is
# the retry; one nginx for the whole file. Runs on both stores (Makefile: STORE_AGNOSTIC_TESTS) but
# TEST 8, whose joiner is on a second gateway sharing the test Redis.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks ();
use Idem::Live;
use Idem::Nginx ();
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();

sub port { IdempotencyTest::nginx_port() }

# The locations of the file's nginx (TEST 1's; the blocks after it run on
# its nginx): the guarded "location /", and /shaped, whose response is
# written as events but sent as application/json.
sub locations {
    return Idem::Blocks::idem_location('idempotency_wait 10s', 'proxy_buffering off')
         . Idem::Blocks::location_conf('/shaped', 'idempotency on',
                                       'add_header X-Idempotency-Status $idempotency_status always',
                                       'proxy_pass http://127.0.0.1:$TEST_NGINX_SERVER_PORT/_shaped')
         . Idem::Blocks::location_conf('= /_shaped', 'default_type application/json',
                                       'return 201 "id: 1\ndata: a\n\nid: 2\ndata: b\n\n"');
}

# Event I of N as upstream.pl sends it.
sub event { my ($i, $n) = @_; "id: $i\ndata: event $i of $n\n\n" }
sub events { my ($from, $to, $n) = @_; join '', map { event($_, $n) } $from .. $to }
# ... with the ids the upstream was given (ids=)
sub events_ids {
    my ($from, $n, @ids) = @_;
    return join '', map { "id: $ids[$_ - 1]\ndata: event $_ of $n\n\n" } $from .. $n;
}

# The original of $key: POST $uri, read whole, and its record stored.
sub stored_original {
    my ($uri, $key) = @_;
    my $res = Idem::Live::post(port(), $uri, $key)->finish;
    die "$key: the original got $res->{status}, " . ($res->{complete} ? 'whole' : 'cut off') . "\n"
        unless $res->{status} == 201 && $res->{complete};
    Idem::Store::stored($key, 'response') or die "$key: the original's response was not stored\n";
    return $res;
}

# A second gateway on the test Redis, its location as the first's. It runs
# the nginx and the module under test (Idem::Nginx::nginx_beside_test).
sub other_gateway {
    return Idem::Nginx::nginx_beside_test('other', workers => 1,
        http => "upstream backend { server 127.0.0.1:$ENV{TEST_NGINX_UPSTREAM_PORT}; }\n"
              . 'idempotency_redis 127.0.0.1:' . IdempotencyTest::redis_port() . ';',
        server => "server_name localhost;\n"
                . Idem::Blocks::idem_location('idempotency_wait 10s', 'proxy_buffering off'));
}

# An original streams 4 events behind a gate; after it sent event 2, a
# retry with Last-Event-ID: 1 joins (on $joiner_port, default the same
# gateway): it gets the head, event 2 and not event 1, then events 3 and 4
# as they come; the upstream runs once. A step that dies is a failed test,
# and the gate is opened to the end so that the original finishes.
sub joins_after {
    my ($path, $key, $gate, $joiner_port) = @_;
    my $uri = "$path?sse=4&gate=$gate";
    my $ok = eval {
        my $original = Idem::Live::post(port(), $uri, $key);
        Idem::Live::open_gate($gate, 2);
        $original->body_has('event 2 of 4');
        my $joiner = Idem::Live::post($joiner_port // port(), $uri, $key, "Last-Event-ID: 1\r\n");
        my $head = $joiner->head(5);
        Test::More::is($head->{status}, 201, "$key: the retry gets the original's status at once");
        Test::More::is($head->{headers}{'x-idempotency-status'}, 'joined', "$key: ... as joined");
        Test::More::is($head->{headers}{'content-type'}, 'text/event-stream', "$key: ... with its headers");
        Test::More::is($joiner->body_has('event 2 of 4', 5), event(2, 4),
                       "$key: ... and the events sent so far after event 1: event 2 alone");
        Idem::Live::open_gate($gate, 3);
        Test::More::is($joiner->body_has('event 3 of 4', 5), events(2, 3, 4), "$key: event 3 as it comes");
        Idem::Live::open_gate($gate, 4);
        my $first = $original->finish;
        my $joined = $joiner->finish;
        Test::More::is($first->{body}, events(1, 4, 4), "$key: the original gets every event");
        Test::More::ok($joined->{complete}, "$key: the retry's response ends whole");
        Test::More::is($joined->{body}, events(2, 4, 4), "$key: ... with every event after event 1");
        Test::More::is(IdempotencyTest::upstream_count($path), 1, "$key: the upstream ran once");
        1;
    };
    return if $ok;
    Test::More::fail("$key: $@");
    eval { Idem::Live::open_gate($gate, 99) };
}

run_tests();

__DATA__

=== TEST 1: a stored event stream retried with Last-Event-ID: 2 gets events 3 to 5, with the stored status and headers
--- init
main::stored_original('/resume/1?sse=5', 'resume-1');
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- request
POST /resume/1?sse=5
x
--- more_headers
Idempotency-Key: resume-1
Last-Event-ID: 2
--- error_code: 201
--- response_headers
Content-Type: text/event-stream
Cache-Control: no-cache
X-Upstream-Execution: 1
Idempotent-Replayed: true
X-Idempotency-Status: replayed
--- response_body eval
main::events(3, 5, 5)


=== TEST 2: Last-Event-ID of the last event: an empty body
--- init
main::stored_original('/resume/2?sse=5', 'resume-2');
--- request
POST /resume/2?sse=5
x
--- more_headers
Idempotency-Key: resume-2
Last-Event-ID: 5
--- error_code: 201
--- response_headers
Content-Type: text/event-stream
X-Idempotency-Status: replayed
--- response_body eval
""


=== TEST 3: an id no event set gets the whole stream
--- init
main::stored_original('/resume/3?sse=5', 'resume-3');
--- request
POST /resume/3?sse=5
x
--- more_headers
Idempotency-Key: resume-3
Last-Event-ID: 6
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::events(1, 5, 5)


=== TEST 4: without Last-Event-ID the whole stream
--- init
main::stored_original('/resume/4?sse=5', 'resume-4');
--- request
POST /resume/4?sse=5
x
--- more_headers
Idempotency-Key: resume-4
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::events(1, 5, 5)


=== TEST 5: a JSON response retried with Last-Event-ID gets its whole body
--- init
main::stored_original('/resume/5', 'resume-5');
--- request
POST /resume/5
x
--- more_headers
Idempotency-Key: resume-5
Last-Event-ID: 1
--- error_code: 201
--- response_headers
Content-Type: application/json
X-Idempotency-Status: replayed
--- response_body_like: \A\{"path":"/resume/5","method":"POST","execution":1,.*\}\n?\z


=== TEST 6: a body written as events but sent as application/json is not an event stream: replayed whole
--- init
main::stored_original('/shaped', 'resume-6');
--- request
POST /shaped
x
--- more_headers
Idempotency-Key: resume-6
Last-Event-ID: 1
--- error_code: 201
--- response_headers
Content-Type: application/json
X-Idempotency-Status: replayed
--- response_body eval
"id: 1\ndata: a\n\nid: 2\ndata: b\n\n"


=== TEST 7: a retry with Last-Event-ID joins the live stream after that event, then one after the end resumes the stored one
--- init
main::joins_after('/resume/7', 'resume-7', 'resume7');
--- request
POST /resume/7?sse=4&gate=resume7
x
--- more_headers
Idempotency-Key: resume-7
Last-Event-ID: 3
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::event(4, 4)


=== TEST 8: the same on another gateway, through the live log in Redis
--- redis_only
--- init
my $other = main::other_gateway();
main::joins_after('/resume/8', 'resume-8', 'resume8', $other->{port});
Idem::Nginx::nginx_stop($other);
--- request
POST /resume/8?sse=4&gate=resume8
x
--- more_headers
Idempotency-Key: resume-8
Last-Event-ID: 3
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::event(4, 4)


=== TEST 9: an id with spaces around it, which HTTP does not carry: the stream resumes after the first event it could be, never skipping events
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::stored_original('/resume/9?sse=4&ids=%205,a,5,b', 'resume-9');
--- request
POST /resume/9?sse=4&ids=%205,a,5,b
x
--- more_headers
Idempotency-Key: resume-9
Last-Event-ID:  5
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::events_ids(2, 4, ' 5', 'a', '5', 'b')


=== TEST 10: ... and tabs
--- init
main::stored_original('/resume/10?sse=3&ids=%095%09,x,5', 'resume-10');
--- request
POST /resume/10?sse=3&ids=%095%09,x,5
x
--- more_headers
Idempotency-Key: resume-10
Last-Event-ID: 5
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
--- response_body eval
main::events_ids(2, 3, "\t5\t", 'x', '5')



=== TEST 11: a retry with Last-Event-ID joining a stream that another gateway's log already shows ended whole: its Content-Length counts only the events after that id
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
# another gateway's original, in flight: its claim and its live log, whole
my $uri = '/resume/11?sse=4';
my $token = 'another-gateway:resume-11';
my $rkey = IdempotencyTest::redis_key('resume-11');
IdempotencyTest::redis_command('SET', Idem::Live::live_key($rkey, $token),
    Idem::Live::live_start()
    . Idem::Live::live_head(Idem::Live::fingerprint($uri), 201, ['Content-Type', 'text/event-stream'])
    . join('', map { Idem::Live::live_body(main::event($_, 4)) } 1 .. 4) . Idem::Live::live_end(1), 'PX', 60000);
IdempotencyTest::redis_command('SET', $rkey, Idem::Live::claim_record(Idem::Live::fingerprint($uri), $token),
                               'PX', 60000);
my $joined = Idem::Live::post(main::port(), $uri, 'resume-11', "Last-Event-ID: 2\r\n")->finish;
Test::More::is("$joined->{status} " . ($joined->{headers}{'x-idempotency-status'} // '-'), '201 joined',
               'resume-11: the retry joins');
Test::More::is($joined->{headers}{'content-length'}, length main::events(3, 4, 4),
               'resume-11: ... its length, that of the events after event 2');
Test::More::ok($joined->{complete}, 'resume-11: ... which it gets, whole');
Test::More::is($joined->{body}, main::events(3, 4, 4), 'resume-11: ... events 3 and 4');
--- request
GET /_count/resume/11
--- response_body: 0
