# A response that could never be sent again — a status outside 200-599 (a
# 1xx is no final answer), a header name that is not an HTTP token — is
# known as such when it is captured (docs/design.md#unreplayable): its
# client gets it as nginx passed it on, and the key keeps the unreplayable
# marker saying why (record version 5) instead of a record the replay would
# refuse. The error log says so once, naming the store key and the reason,
# never the header's bytes; every retry, and a duplicate that waited for
# the original, gets 410 with the reason in the problem document's detail;
# the operator's inspection shows it (`unreplayable.why`); the upstream
# executed once. Runs on Redis and on the zone store (STORE_AGNOSTIC_TESTS).
#
# What reaches the capture is what nginx's proxy passes on: a status of
# 600-999 and a 1xx other than 101 and 103 (read as the final response),
# and a header name with characters outside a token (nginx flags it and
# passes it on); a value with CR, LF or NUL, and a name with a space or a
# control byte, nginx refuses itself (502), and it hands on no HTTP/1.1
# trailers: those flaws, and the trailers', are the unit tests'
# (t/unit/test_replayable.cpp: the capture's rule is the decoder's, flaw
# for flaw).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf counted_location);
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

# The guarded location with @directives, the upstream's counts, and the
# operator's endpoint.
sub locations {
    return counted_location(@_) . location_conf('/_admin', 'idempotency_admin');
}

# Each case's line in the error log, whole: once, at error, naming the
# store key (the same on either store) and the reason; never the header's
# name above debug; no replay that met a record it refuses.
sub logged_once {
    my (@cases) = @_;
    open my $fh, '<', $Test::Nginx::Util::ErrLogFile or die "no error log: $!\n";
    my @lines = <$fh>;
    for my $case (@cases) {
        my ($key, $reason) = @$case;
        my $store_key = IdempotencyTest::redis_key($key);
        my @said = grep { /cannot be replayed/ && /"\Q$store_key\E"/ } @lines;
        Test::More::is(scalar @said, 1, "$0 - $key: logged once") or Test::More::diag(@said);
        Test::More::like($said[0] // '',
                         qr/\[error\] [^\n]*idempotency: the response to "\Q$store_key\E" cannot be replayed: \Q$reason\E(?: while |,|$)/,
                         "$0 - $key: ... at error, naming the store key and the reason");
    }
    Test::More::is_deeply([grep { /\[(?:error|warn|notice|info)\]/ && /X\(Bad\)|X\@Bad/ } @lines], [],
                          "$0 - the header's name never appears above debug");
    Test::More::is_deeply([grep { /does not open/ } @lines], [], "$0 - no replay met a record it refuses");
}

__DATA__

=== TEST 1: a header name that is not a token: delivered as it is; kept as the marker that says why, its retries 410 with the reason, the inspection tells it, one execution
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('idempotency_store_errors on', 'idempotency_wait 10s')
--- request eval
["POST /bad/1?raw_header=X%28Bad%29:v\nx", "POST /bad/1?raw_header=X%28Bad%29:v\nx",
 "POST /bad/1?raw_header=X%28Bad%29:v\nx", "GET /_admin", "GET /_count/bad/1"]
--- more_headers
Idempotency-Key: bad-1
--- error_code eval
[201, 410, 410, 200, 200]
--- raw_response_headers_like eval
[qr/\r\nX\(Bad\): v\r\n/, qr/\r\nX-Idempotency-Status: unreplayable\r\n/, qr/\r\nContent-Type: application\/problem\+json\r\n/,
 qr//, qr//]
--- response_body_like eval
[qr/"execution":1/,
 qr/\A\{"type":"urn:nginx-idempotency:problem:response-not-replayable","title":"Response cannot be replayed","status":410,"detail":"The request with this idempotency key was executed, but its response cannot be replayed: a header or trailer name is not an HTTP token\. It is not executed again\."\}\z/,
 qr/"detail":"[^"]*a header or trailer name is not an HTTP token/,
 qr/"state":"unreplayable".*"unreplayable":\{"status":201,"why":"a header or trailer name is not an HTTP token"\}/,
 qr/\A1\z/]
--- no_error_log
does not open


=== TEST 2: a status of 600 (kept with idempotency_store_errors): delivered; kept as the marker, its retry 410 with the reason, the inspection tells it, one execution
--- request eval
["POST /bad/2?status=600\nx", "POST /bad/2?status=600\nx", "GET /_admin", "GET /_count/bad/2"]
--- more_headers
Idempotency-Key: bad-2
--- error_code eval
[600, 410, 200, 200]
--- response_body_like eval
[qr/"execution":1/,
 qr/"status":410,"detail":"The request with this idempotency key was executed, but its response cannot be replayed: its status is outside 200-599 \(a 1xx is no final answer\)\. It is not executed again\."/,
 qr/"unreplayable":\{"status":600,"why":"its status is outside 200-599 \(a 1xx is no final answer\)"\}/,
 qr/\A1\z/]
--- no_error_log
does not open


=== TEST 3: a 1xx as the final answer: delivered as nginx passed it on; kept as the marker, its retry 410 with the reason, the inspection tells it, one execution
--- request eval
["POST /bad/3?status=199\nx", "POST /bad/3?status=199\nx", "GET /_admin", "GET /_count/bad/3"]
--- more_headers
Idempotency-Key: bad-3
--- error_code eval
[199, 410, 200, 200]
--- response_body_like eval
[qr/"execution":1/,
 qr/"status":410,"detail":"[^"]*its status is outside 200-599 \(a 1xx is no final answer\)/,
 qr/"unreplayable":\{"status":199,"why":"its status is outside 200-599 \(a 1xx is no final answer\)"\}/,
 qr/\A1\z/]
--- no_error_log
does not open


=== TEST 4: a duplicate that waited for such an original gets 410 with the reason
--- init
$main::original = IdempotencyTest::start_in_flight('/bad/4?sleep=0.5&raw_header=X%40Bad:v', 'bad-4');
--- request
POST /bad/4?sleep=0.5&raw_header=X%40Bad:v
x
--- more_headers
Idempotency-Key: bad-4
--- error_code: 410
--- response_headers
X-Idempotency-Status: unreplayable
--- response_body_like: "status":410,"detail":"[^"]*a header or trailer name is not an HTTP token


=== TEST 5: ... the original's client got the response whole, with the header as the upstream sent it; one execution
--- init
my $res = IdempotencyTest::read_response($main::original);
Test::More::is($res->{status}, 201, "$0 - the original gets 201");
Test::More::is($res->{headers}{'x@bad'}, 'v', "$0 - ... with the upstream's header");
--- request
GET /_count/bad/4
--- error_code: 200
--- response_body: 1


=== TEST 6: each was logged once, at capture, at error, with its store key and reason, never the header's name; nothing said at the replays
--- init
main::logged_once(['bad-1', 'a header or trailer name is not an HTTP token'],
                  ['bad-2', 'its status is outside 200-599 (a 1xx is no final answer)'],
                  ['bad-3', 'its status is outside 200-599 (a 1xx is no final answer)'],
                  ['bad-4', 'a header or trailer name is not an HTTP token']);
--- request
GET /_count/bad/1
--- error_code: 200
--- response_body: 1
