# The header that marks a replay (idempotency_replayed_header NAME | off;
# by default Idempotent-Replayed): a replay, a replay after waiting for the
# original, and a duplicate that joins the original's live response carry
# "NAME: true"; the original never does; off sends none. Inherited like the
# other directives; nginx -t refuses a bad name. A header of that name the
# upstream sent itself is the original's, never recorded: a replay carries
# the module's one "true" alone.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf summary);
use Idem::Live;
use Test::Nginx::Socket 'no_plan';

# POSTs "x" to $uri with $key on its own connection: {status, headers, body}.
sub http_post { Idem::Blocks::post(@_) }

# The same, the response as it came: its head and body as one string.
sub raw_post {
    my ($uri, $key) = @_;
    my $sock = IdempotencyTest::send_request(
        "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
        . "Content-Length: 1\r\n\r\nx");
    my $got = '';
    1 while sysread($sock, $got, 65536, length $got);
    close $sock;
    return $got;
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: by default a replay carries Idempotent-Replayed: true, the original does not
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location()
--- request eval
["POST /rh/1\nx", "POST /rh/1\nx"]
--- more_headers eval
["Idempotency-Key: rh-1", "Idempotency-Key: rh-1"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\n!Idempotent-Replayed", "X-Idempotency-Status: replayed\nIdempotent-Replayed: true"]
--- no_error_log
[error]


=== TEST 2: idempotency_replayed_header Idempotency-Replayed names it instead
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_replayed_header Idempotency-Replayed')
--- request eval
["POST /rh/2\nx", "POST /rh/2\nx"]
--- more_headers eval
["Idempotency-Key: rh-2", "Idempotency-Key: rh-2"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\n!Idempotency-Replayed\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nIdempotency-Replayed: true\n!Idempotent-Replayed"]
--- no_error_log
[error]


=== TEST 3: off sends none: the replay is told by $idempotency_status alone
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_replayed_header off')
--- request eval
["POST /rh/3\nx", "POST /rh/3\nx"]
--- more_headers eval
["Idempotency-Key: rh-3", "Idempotency-Key: rh-3"]
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1\n!Idempotent-Replayed",
 "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1\n!Idempotent-Replayed"]
--- no_error_log
[error]


=== TEST 4: set at the server level, a location inherits it; a location's own off wins
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"idempotency_replayed_header X-Replay;\n"
. main::idem_location()
. main::location_conf('/quiet/', 'idempotency on', 'idempotency_replayed_header off',
                      'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
--- request eval
["POST /rh/4\nx", "POST /rh/4\nx", "POST /quiet/rh/4\nx", "POST /quiet/rh/4\nx"]
--- more_headers eval
["Idempotency-Key: rh-4", "Idempotency-Key: rh-4", "Idempotency-Key: rh-4-quiet", "Idempotency-Key: rh-4-quiet"]
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
["X-Idempotency-Status: new\n!X-Replay", "X-Idempotency-Status: replayed\nX-Replay: true\n!Idempotent-Replayed",
 "X-Idempotency-Status: new\n!X-Replay", "X-Idempotency-Status: replayed\n!X-Replay\n!Idempotent-Replayed"]
--- no_error_log
[error]


=== TEST 5: a duplicate that waited for the original gets the replay with the configured name
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_replayed_header X-Replay', 'idempotency_wait 10s')
--- init
my $original = IdempotencyTest::start_in_flight('/rh/5?sleep=0.5', 'rh-5');
my $waited = main::http_post('/rh/5?sleep=0.5', 'rh-5');
my $first = IdempotencyTest::read_response($original);
Test::More::is(main::summary($first), '201 new 1', 'TEST 5: the original executes');
Test::More::ok(!exists $first->{headers}{'x-replay'}, 'TEST 5: ... unmarked');
Test::More::like(main::summary($waited), qr/\A201 (waited|joined) 1\z/, 'TEST 5: the duplicate waited for it');
Test::More::is($waited->{headers}{'x-replay'}, 'true', 'TEST 5: ... and is marked X-Replay: true');
Test::More::ok(!exists $waited->{headers}{'idempotent-replayed'}, 'TEST 5: ... not Idempotent-Replayed');
--- request
GET /rh/5
--- error_code: 201
--- no_error_log
[error]


=== TEST 6: a duplicate that joins the original's live response is marked with the configured name
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_replayed_header X-Replay', 'idempotency_wait 10s', 'proxy_buffering off')
--- init
my $port = IdempotencyTest::nginx_port();
my $original = Idem::Live::post($port, '/rh/6?sse=3&gate=rh6', 'rh-6');
$original->body_has('event 1 of 3');
my $joiner = Idem::Live::post($port, '/rh/6?sse=3&gate=rh6', 'rh-6');
my $head = $joiner->head;
Test::More::is($head->{headers}{'x-idempotency-status'}, 'joined', 'TEST 6: the duplicate joins');
Test::More::is($head->{headers}{'x-replay'}, 'true', 'TEST 6: ... marked X-Replay: true');
Test::More::ok(!exists $head->{headers}{'idempotent-replayed'}, 'TEST 6: ... not Idempotent-Replayed');
Idem::Live::open_gate('rh6', 3);
my $first = $original->finish;
Test::More::ok(!exists $first->{headers}{'x-replay'}, 'TEST 6: the original is not marked');
Test::More::ok($joiner->finish->{complete}, 'TEST 6: the joiner gets the whole response');
--- request
GET /rh/6
--- error_code: 201
--- no_error_log
[error]


=== TEST 7: the upstream's own header of that name reaches the original's client, never a replay: one "true" there
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::idem_location('idempotency_replayed_header X-Replay')
--- init
my $uri = '/rh/7?header=X-Replay:from-the-upstream';
my $first = main::raw_post($uri, 'rh-7');
Test::More::like($first, qr/^X-Replay: from-the-upstream\r$/m, 'TEST 7: the original passes the upstream\'s header');
my $replay = main::raw_post($uri, 'rh-7');
Test::More::like($replay, qr/^X-Idempotency-Status: replayed\r$/m, 'TEST 7: the retry is replayed');
my @marks = $replay =~ /^X-Replay: (.*?)\r$/mg;
Test::More::is("@marks", 'true', 'TEST 7: ... with the one mark the module adds');
# a header that is only the default marker's name is the upstream's like any other
my $other = main::raw_post('/rh/7b?header=Idempotent-Replayed:upstream-said', 'rh-7b');
my $again = main::raw_post('/rh/7b?header=Idempotent-Replayed:upstream-said', 'rh-7b');
Test::More::like($again, qr/^X-Replay: true\r$/m, 'TEST 7: another marker name: the retry is marked with it');
Test::More::like($again, qr/^Idempotent-Replayed: upstream-said\r$/m,
                 'TEST 7: ... and carries the upstream\'s Idempotent-Replayed as the original\'s client got it');
--- request
GET /rh/7
--- error_code: 201
--- no_error_log
[error]


=== TEST 8: nginx -t refuses a name that is not a header name, naming the directive
--- config eval
main::location_conf('/', 'idempotency_replayed_header "Replayed: yes"', 'proxy_pass http://backend')
--- must_die
--- error_log
invalid header name "Replayed: yes" in "idempotency_replayed_header"
