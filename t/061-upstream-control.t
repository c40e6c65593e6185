# The upstream's word on its own answer (idempotency_upstream_control NAME):
# its response header NAME, a list of directives like Cache-Control, says
# whether the answer is stored and for how long (docs/design.md#first-execution):
#
# - no-store: the key is released ($idempotency_status "released"), the
#   retry reaches the upstream again;
# - ttl=SECONDS: the answer is kept that long instead of idempotency_ttl
#   (the record's PTTL on Redis; on every store, the key executes again
#   once it passed), 365 days at most;
# - store: a 5xx and a status of idempotency_release_statuses are stored
#   and replayed; never a response too large to keep (410);
# - the header never reaches a client: not the original's, not a replay's,
#   not a GET's the module lets pass, not over HTTP/2; whatever the case of
#   its name, and several of them read as one list;
# - what cannot be understood is warned about (once, without the key) and
#   ignored; store with no-store leaves it all to the configuration;
# - without the directive (or with off) the header passes untouched and
#   means nothing; nginx -t refuses a bad header name.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf summary);
use Idem::Live;
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_H2_PORT} = IdempotencyTest::free_port();

our $CONTROL = 'idempotency_upstream_control X-Idempotency-Control';

# POSTs "x" to $uri with $key on its own connection: {status, headers, body}.
sub http { Idem::Blocks::post(@_) }

# The record's remaining life in Redis, in ms, once the response to $key is stored.
sub stored_pttl {
    my ($key) = @_;
    IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key($key)) // '') eq 'response' }, 10)
        or return -1;
    return IdempotencyTest::redis_command('PTTL', IdempotencyTest::redis_key($key));
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: no-store releases the key: the retry reaches the upstream again; neither client sees the header
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL)
--- init
Test::More::is(main::summary(main::http('/uc/1?header=X-Idempotency-Control:no-store', 'uc-1')), '201 released 1',
               'TEST 1: the first request is released');
--- request
POST /uc/1?header=X-Idempotency-Control:no-store
x
--- more_headers
Idempotency-Key: uc-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: released
X-Upstream-Execution: 2
!X-Idempotency-Control
!Idempotent-Replayed
--- response_body_like: "execution":2,
--- error_log eval
qr/\[info\] .*idempotency: releasing "idem:[0-9a-f]{64}": the upstream asked not to store its answer \(no-store\)/
--- no_error_log
[error]
header ignored


=== TEST 2: ttl=600 keeps the record 600 s instead of idempotency_ttl (24h), as do two headers named in other cases read as one list ("store" on a 503, "ttl=600"); a bad ttl leaves idempotency_ttl, one over 365 days is capped; no replay carries the header
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL)
--- init
my $first = main::http('/uc/2?header=X-Idempotency-Control:ttl=600', 'uc-2');
Test::More::is(main::summary($first), '201 new 1', 'TEST 2: the first request executes');
Test::More::ok(!exists $first->{headers}{'x-idempotency-control'}, 'TEST 2: the client does not see the header');
my $pttl = main::stored_pttl('uc-2');
Test::More::ok($pttl > 590_000 && $pttl <= 600_000, "TEST 2: the record lives 600 s (PTTL $pttl ms)");

my $uri = '/uc/2b?status=503&header=x-idempotency-control:store&header=X-IDEMPOTENCY-CONTROL:%20ttl%3D600';
my $b = main::http($uri, 'uc-2b');
Test::More::is(main::summary($b), '503 new 1', 'TEST 2: the 503 is stored');
Test::More::ok(!grep({ /x-idempotency-control/i } keys %{ $b->{headers} }), 'TEST 2: neither header reaches the client');
$pttl = main::stored_pttl('uc-2b');
Test::More::ok($pttl > 590_000 && $pttl <= 600_000, "TEST 2: the 503's record lives 600 s (PTTL $pttl ms)");
my $again = main::http($uri, 'uc-2b');
Test::More::is(main::summary($again), '503 replayed 1', 'TEST 2: the 503 is replayed');
Test::More::ok(!grep({ /x-idempotency-control/i } keys %{ $again->{headers} }), 'TEST 2: ... without the header');

Test::More::is(main::summary(main::http('/uc/2c?header=X-Idempotency-Control:ttl%3D0', 'uc-2c')), '201 new 1',
               'TEST 2: ttl=0 is stored');
$pttl = main::stored_pttl('uc-2c');
Test::More::ok($pttl > 86_000_000, "TEST 2: ... for idempotency_ttl (PTTL $pttl ms)");

Test::More::is(main::summary(main::http('/uc/2d?header=X-Idempotency-Control:ttl%3D604800000', 'uc-2d')), '201 new 1',
               'TEST 2: a week in milliseconds by mistake is stored');
$pttl = main::stored_pttl('uc-2d');
Test::More::ok($pttl > 31_535_000_000 && $pttl <= 31_536_000_000, "TEST 2: ... for 365 days at most (PTTL $pttl ms)");
--- request
POST /uc/2?header=X-Idempotency-Control:ttl=600
x
--- more_headers
Idempotency-Key: uc-2
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
!X-Idempotency-Control
--- error_log eval
[qr/\[warn\] .*1 part\(s\) of the upstream's "X-Idempotency-Control" header ignored: "ttl" needs a positive number of seconds "ttl=0"/,
 qr/\[warn\] .*1 part\(s\) of the upstream's "X-Idempotency-Control" header ignored: ttl capped at 365 days \(31536000 seconds\) "ttl=604800000"/]
--- no_error_log
[error]


=== TEST 3: ttl=2 under idempotency_ttl 1h: replayed at first, the key executes again once 2 s passed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL, 'idempotency_ttl 1h')
--- init
my $uri = '/uc/3?header=X-Idempotency-Control:ttl=2';
my $start = Time::HiRes::time();
Test::More::is(main::summary(main::http($uri, 'uc-3')), '201 new 1', 'TEST 3: the first request executes');
Test::More::is(main::summary(main::http($uri, 'uc-3')), '201 replayed 1', 'TEST 3: at once, the retry is replayed');
my $again = IdempotencyTest::wait_until(sub {
    my $res = main::http($uri, 'uc-3');
    return $res->{headers}{'x-idempotency-status'} eq 'new' ? $res : undef;
}, 10);
my $took = Time::HiRes::time() - $start;
Test::More::ok($again, 'TEST 3: the record expired: a retry executed again');
Test::More::is($again && main::summary($again), '201 new 2', 'TEST 3: the second execution');
Test::More::ok($took >= 1.9, "TEST 3: not before the 2 s the upstream asked ($took s)");
--- request
GET /uc/3
--- error_code: 201
--- no_error_log
[error]
header ignored


=== TEST 4: store keeps a 502, a 503 and a 429 (released without it): the retries are replayed; never a response too large to keep (410)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL, 'idempotency_max_response_size 1k')
--- request eval
["POST /uc/4a?status=502&header=X-Idempotency-Control:store\nx", "POST /uc/4a?status=502&header=X-Idempotency-Control:store\nx",
 "POST /uc/4b?status=503&header=X-Idempotency-Control:store\nx", "POST /uc/4b?status=503&header=X-Idempotency-Control:store\nx",
 "POST /uc/4c?status=429&header=X-Idempotency-Control:store\nx", "POST /uc/4c?status=429&header=X-Idempotency-Control:store\nx",
 "POST /uc/4d?size=4000&header=X-Idempotency-Control:store\nx", "POST /uc/4d?size=4000&header=X-Idempotency-Control:store\nx"]
--- more_headers eval
["Idempotency-Key: uc-4a", "Idempotency-Key: uc-4a", "Idempotency-Key: uc-4b", "Idempotency-Key: uc-4b",
 "Idempotency-Key: uc-4c", "Idempotency-Key: uc-4c", "Idempotency-Key: uc-4d", "Idempotency-Key: uc-4d"]
--- error_code eval
[502, 502, 503, 503, 429, 429, 201, 410]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: unreplayable\n!X-Upstream-Execution\n!X-Idempotency-Control"]
--- no_error_log
[error]
header ignored
releasing


=== TEST 5: a GET the module lets pass does not carry the header either, nor the location's other requests; without the directive it passes untouched and means nothing
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL)
. main::location_conf('/plain/', $main::CONTROL, 'proxy_pass http://backend')
. main::location_conf('/bare/', 'idempotency on', 'add_header X-Idempotency-Status $idempotency_status always',
                      'proxy_pass http://backend')
--- request eval
["GET /uc/7?header=X-Idempotency-Control:no-store", "POST /uc/7b?header=X-Idempotency-Control:store\nx",
 "POST /plain/uc/7c?header=X-Idempotency-Control:store\nx",
 "POST /bare/uc/7d?header=X-Idempotency-Control:no-store\nx", "POST /bare/uc/7d?header=X-Idempotency-Control:no-store\nx"]
--- more_headers eval
["", "", "", "Idempotency-Key: uc-7d", "Idempotency-Key: uc-7d"]
--- error_code eval
[201, 201, 201, 201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\n!X-Idempotency-Control", "X-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1\nX-Idempotency-Control: no-store",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nX-Idempotency-Control: no-store"]
--- no_error_log
[error]
header ignored
releasing


=== TEST 6: an unknown directive and a bad ttl are warned about once, without the key, and ignored: no-store still heard
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL)
--- init
my $long = 'x' x 100;
Test::More::is(main::summary(main::http("/uc/6b?header=X-Idempotency-Control:no-store,$long", 'uc-6b')), '201 released 1',
               'TEST 6: a long unknown directive is ignored');
Test::More::ok(IdempotencyTest::error_log_has('ignored: unknown directive "' . ('x' x 64) . '..."'),
               'TEST 6: ... and quoted in the warning cut at 64 bytes');
--- request eval
["POST /uc/8?header=X-Idempotency-Control:ttl%3Dsoon,%20no-store,%20frobnicate\nx",
 "POST /uc/8?header=X-Idempotency-Control:ttl%3Dsoon,%20no-store,%20frobnicate\nx"]
--- more_headers eval
["Idempotency-Key: uc-8", "Idempotency-Key: uc-8"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 2\n!X-Idempotency-Control"]
--- error_log eval
qr/\[warn\] .*idempotency: 2 part\(s\) of the upstream's "X-Idempotency-Control" header ignored: "ttl" needs a positive number of seconds "ttl=soon"/
--- no_error_log eval
[qr/header ignored[^\n]*idem:/, qr/\[error\]/]


=== TEST 7: store with no-store contradict: warned, the configuration decides: a 502 is released, a 201 stored
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL)
--- init
my $uri = '/uc/10b?header=X-Idempotency-Control:no-store,store';
Test::More::is(main::summary(main::http($uri, 'uc-10b')), '201 new 1', 'TEST 7: a 201 under the contradiction is stored');
Test::More::is(main::summary(main::http($uri, 'uc-10b')), '201 replayed 1', 'TEST 7: ... and replayed');
--- request eval
["POST /uc/10a?status=502&header=X-Idempotency-Control:store,no-store\nx",
 "POST /uc/10a?status=502&header=X-Idempotency-Control:store,no-store\nx"]
--- more_headers eval
["Idempotency-Key: uc-10a", "Idempotency-Key: uc-10a"]
--- error_code eval
[502, 502]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1", "X-Idempotency-Status: released\nX-Upstream-Execution: 2"]
--- error_log eval
qr/\[warn\] .*header ignored: "store" with "no-store": the header is ignored/
--- no_error_log
[error]


=== TEST 8: set in the http block it is inherited; off in a location turns it off there
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_upstream_control X-Idempotency-Control;
--- config eval
main::idem_location()
. main::location_conf('/off/', 'idempotency on', 'idempotency_upstream_control off',
                      'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
--- request eval
["POST /uc/12?header=X-Idempotency-Control:no-store\nx", "POST /uc/12?header=X-Idempotency-Control:no-store\nx",
 "POST /off/uc/12?header=X-Idempotency-Control:no-store\nx", "POST /off/uc/12?header=X-Idempotency-Control:no-store\nx"]
--- more_headers eval
["Idempotency-Key: uc-12", "Idempotency-Key: uc-12", "Idempotency-Key: uc-12-off", "Idempotency-Key: uc-12-off"]
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: released\nX-Upstream-Execution: 1\n!X-Idempotency-Control",
 "X-Idempotency-Status: released\nX-Upstream-Execution: 2\n!X-Idempotency-Control",
 "X-Idempotency-Status: new\nX-Upstream-Execution: 1\nX-Idempotency-Control: no-store",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\nX-Idempotency-Control: no-store"]
--- no_error_log
[error]


=== TEST 9: over HTTP/2 the header is taken out and heard alike
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_H2_PORT http2;
    location / {
        idempotency on;
        idempotency_upstream_control X-Idempotency-Control;
        add_header X-Idempotency-Status $idempotency_status always;
        proxy_pass http://backend;
    }
}
--- config
location /_count/ {
    proxy_pass http://backend;
}
--- init
for my $n (1, 2) {
    my $res = IdempotencyTest::h2_post($ENV{TEST_NGINX_H2_PORT}, '/uc/13?header=X-Idempotency-Control:no-store',
                                       key => 'uc-13', body => 'x');
    Test::More::is($res->{status}, 201, "TEST 9: HTTP/2 request $n: 201");
    Test::More::is($res->{headers}{'x-idempotency-status'}, 'released', "TEST 9: request $n released");
    Test::More::ok(!exists $res->{headers}{'x-idempotency-control'}, "TEST 9: request $n does not carry the header");
}
--- request
GET /_count/uc/13
--- response_body chomp
2
--- no_error_log
[error]


=== TEST 10: a duplicate that joins the live response gets its head without the header; the original's client neither
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location($main::CONTROL, 'idempotency_wait 10s', 'proxy_buffering off')
--- init
my $port = IdempotencyTest::nginx_port();
my $uri = '/uc/13b?sse=3&gate=uc13b&header=X-Idempotency-Control:store';
my $original = Idem::Live::post($port, $uri, 'uc-13b');
$original->body_has('event 1 of 3');
my $joiner = Idem::Live::post($port, $uri, 'uc-13b');
my $head = $joiner->head;
Test::More::is($head->{headers}{'x-idempotency-status'}, 'joined', 'TEST 10: the duplicate joins');
Test::More::ok(!exists $head->{headers}{'x-idempotency-control'}, 'TEST 10: ... without the header');
Idem::Live::open_gate('uc13b', 3);
my $first = $original->finish;
Test::More::ok(!exists $first->{headers}{'x-idempotency-control'}, 'TEST 10: the original is without it too');
Test::More::ok($joiner->finish->{complete}, 'TEST 10: the joiner gets the whole response');
--- request
POST /uc/13b?sse=3&gate=uc13b&header=X-Idempotency-Control:store
x
--- more_headers
Idempotency-Key: uc-13b
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
!X-Idempotency-Control
--- no_error_log
[error]


=== TEST 11: nginx -t refuses a header name that is not one, naming the directive
--- config eval
main::location_conf('/', 'idempotency_upstream_control "X Control"', 'proxy_pass http://backend')
--- must_die
--- error_log
invalid header name "X Control" in "idempotency_upstream_control"


