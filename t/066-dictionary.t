# Compression dictionaries (idempotency_compress_dictionary,
# docs/performance.md#dictionaries): with a dictionary trained on a
# location's responses (scripts/train-dictionary.sh), a small JSON record
# is kept far smaller than zstd alone makes it, and replayed byte for byte.
# A location reads a record made with any dictionary it lists (the first
# compresses new records: rotation); one made with a dictionary it lacks
# is answered 410, logged, and never executed again. nginx -t refuses a
# file that is not a zstd dictionary.
# Runs on Redis and on the zone store.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

use lib "$FindBin::Bin/../scripts";
use Bodies ();
use Digest::SHA qw(sha256_hex);
use File::Temp qw(tempdir);
use JSON::PP ();

master_on();
workers(2);
test_nginx_defaults();

# Two dictionaries, trained on payment objects and on acknowledgements
# other than the ones the upstream answers with.
our $DIR = tempdir(CLEANUP => 1);
for my $kind (qw(payment ack)) {
    mkdir "$DIR/$kind" or die "mkdir: $!\n";
    for my $seed (1 .. 300) {
        my ($body) = Bodies::body($kind, $kind eq 'payment' ? 2048 : undef, $seed);
        open my $fh, '>', "$DIR/$kind/$seed.json" or die "$DIR: $!\n";
        print {$fh} $body;
        close $fh;
    }
    my $out = `$FindBin::Bin/../scripts/train-dictionary.sh $DIR/$kind.dict $DIR/$kind 2>&1`;
    die "training the $kind dictionary failed: $out" if $?;
}
open my $fh, '>', "$DIR/not.dict" or die;
print {$fh} "not a dictionary\n" x 10;
close $fh;

run_tests();

# /d compresses with the payment dictionary and reads with both; /b (same
# URIs, reached by X-Other: 1) with the ack dictionary alone; /n has none.
sub locations {
    return location_conf('/', 'error_page 418 = @other', 'if ($http_x_other) { return 418; }', 'idempotency on',
                         "idempotency_compress_dictionary $DIR/payment.dict $DIR/ack.dict",
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('@other', 'idempotency on', "idempotency_compress_dictionary $DIR/ack.dict",
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('/_admin', "idempotency_compress_dictionary $DIR/payment.dict $DIR/ack.dict",
                         'idempotency_admin')
         . location_conf('/_admin_ack', "idempotency_compress_dictionary $DIR/ack.dict", 'idempotency_admin')
         . location_conf('/_admin_small', "idempotency_compress_dictionary $DIR/payment.dict $DIR/ack.dict",
                         'idempotency_max_response_size 1k', 'idempotency_admin');
}

sub send_post {
    my ($uri, $key, $other) = @_;
    return IdempotencyTest::post_key($uri, $key, $other ? ('X-Other: 1') : ());
}

sub inspect { IdempotencyTest::admin_inspect(@_) }

sub new_then_replay {
    my ($name, $uri, $key, $other) = @_;
    my $first = send_post($uri, $key, $other);
    Test::More::is("$first->{status} $first->{headers}{'x-idempotency-status'}", '201 new', "$name: the original");
    my $retry = send_post($uri, $key, $other);
    Test::More::is("$retry->{status} " . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 true',
                   "$name: the retry is a replay");
    Test::More::ok(sha256_hex($retry->{body}) eq sha256_hex($first->{body}), "$name: byte for byte");
    (my $path = $uri) =~ s/\?.*//;
    Test::More::is(IdempotencyTest::upstream_count($path), 1, "$name: executed once");
    return inspect($key);
}

sub smaller {
    my $with = new_then_replay('payment, with its dictionary', '/p/1?kind=payment&size=2048', 'p-1');
    my $ack = new_then_replay('acknowledgement, with a dictionary', '/a/1?kind=ack', 'a-1');
    Test::More::is($with->{compressed}, JSON::PP::true, 'payment: compressed');
    Test::More::cmp_ok($with->{record_bytes}, '<', $with->{plain_bytes} * 0.4,
                       "payment: $with->{record_bytes} bytes for a plain record of $with->{plain_bytes}");
    Test::More::is($ack->{compressed}, JSON::PP::true, 'an acknowledgement of 300 bytes: compressed too');
    Test::More::cmp_ok($ack->{record_bytes}, '<', $ack->{plain_bytes}, 'acknowledgement: smaller');
}

sub rotation {
    # written where the ack dictionary alone compresses, read where it is second
    new_then_replay('written with the second dictionary', '/r/1?kind=ack', 'r-1', 1);
    my $read = send_post('/r/1?kind=ack', 'r-1');
    Test::More::is("$read->{status} " . ($read->{headers}{'idempotent-replayed'} // '-'), '201 true',
                   'read where it is the second dictionary: a replay');
}

# An admin request to $path with the key: {status, json}.
sub admin_at {
    my ($method, $path, $key) = @_;
    my $res = IdempotencyTest::read_response(IdempotencyTest::send_request(
        "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n\r\n"));
    $res->{json} = eval { JSON::PP::decode_json($res->{body}) };
    return $res;
}

# An operator's endpoint whose own settings cannot open a record another
# location replays (a dictionary it lacks; a limit below the record's
# size) reports it not judged there, and purges it only when forced.
sub not_judged_here {
    my $uri = '/j/1?kind=payment&size=2048';
    new_then_replay('written with the payment dictionary', $uri, 'j-1');
    my $ack = admin_at('GET', '/_admin_ack', 'j-1')->{json} // {};
    Test::More::is($ack->{state}, 'unjudged', 'an endpoint without that dictionary: not judged, not unusable');
    Test::More::like($ack->{not_judged_here} // '', qr/dictionary/, '... because of the dictionary');
    Test::More::like($ack->{dictionary_id} // '', qr/\A[1-9]\d*\z/, '... whose id it tells');
    Test::More::cmp_ok($ack->{plain_bytes} // 0, '>', 2048, '... and the size it opens into');
    my $small = admin_at('GET', '/_admin_small', 'j-1')->{json} // {};
    Test::More::is($small->{state}, 'unjudged', 'an endpoint of a smaller idempotency_max_response_size: not judged');
    Test::More::like($small->{not_judged_here} // '', qr/idempotency_max_response_size/, '... because of its size');
    for my $admin ('/_admin_ack', '/_admin_small') {
        my $refused = admin_at('DELETE', $admin, 'j-1');
        Test::More::is($refused->{status}, 409, "$admin: not purged without force=1");
        Test::More::like($refused->{json}{reason} // '', qr/force=1/, '... the reason says how');
    }
    my $retry = send_post($uri, 'j-1');
    Test::More::is("$retry->{status} " . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 true',
                   'the API still replays it');
    Test::More::is(IdempotencyTest::upstream_count('/j/1'), 1, 'never executed again');
    my $forced = admin_at('DELETE', '/_admin_ack?force=1', 'j-1');
    Test::More::is("$forced->{status} " . ($forced->{json}{inspection}{state} // '-'), '200 unjudged', 'forced: purged');
}

# A compressed record that would open into more than an endpoint's limit
# admits (its idempotency_max_response_size and the room of the headers,
# 256 KB) is not opened there to be judged: its frame damaged (its last
# byte, in zstd's checksum), the endpoint whose limit admits it opens it and
# finds it unusable, the one of 1k never opens it (memory within its limit).
sub never_inflated {
    my $uri = '/k/1?size=300000';
    new_then_replay('written compressed', $uri, 'k-1');
    my $rkey = IdempotencyTest::redis_key('k-1');
    my $record = IdempotencyTest::redis_command('GET', $rkey);
    Test::More::is(substr($record, 0, 5), "IDM\x03\x02", 'a compressed record');
    substr($record, -1, 1) = chr(ord(substr($record, -1, 1)) ^ 0xff);
    IdempotencyTest::redis_command('SET', $rkey, $record, 'PX', 600000);
    my $small = admin_at('GET', '/_admin_small', 'k-1')->{json} // {};
    Test::More::is($small->{state}, 'unjudged', 'the endpoint of 1k: not judged, its frame never opened');
    Test::More::like($small->{not_judged_here} // '', qr/idempotency_max_response_size/, '... because of its size');
    my $full = admin_at('GET', '/_admin', 'k-1')->{json} // {};
    Test::More::is($full->{state}, 'unusable', 'the endpoint whose limit admits it opens it: damaged, unusable');
}

__DATA__

=== TEST 1: with a dictionary, a 2 KB payment object and a 300 B acknowledgement are kept far smaller, and replayed byte for byte
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::smaller()
--- request
GET /_count/p/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 2: a record made with any dictionary a location lists is read there (rotation)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::rotation()
--- request
GET /_count/r/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 3: a record made with a dictionary the location lacks: 410, logged, never executed again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
Test::More::is(main::send_post('/m/1?kind=payment&size=2048', 'm-1')->{status}, 201, 'written with the payment dictionary');
--- request
POST /m/1?kind=payment&size=2048
x
--- more_headers
Idempotency-Key: m-1
X-Other: 1
--- error_code: 410
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: it was compressed with a dictionary that is not among this location's idempotency_compress_dictionary/



=== TEST 4: ... and it was not executed again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- request
GET /_count/m/1
--- error_code: 200
--- response_body: 1



=== TEST 5: a file that is not a zstd dictionary is refused by nginx -t
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
"location / { idempotency on; idempotency_compress_dictionary $main::DIR/not.dict; proxy_pass http://backend; }"
--- must_die
--- error_log eval
qr/"idempotency_compress_dictionary": ".*not\.dict" is not a zstd dictionary/



=== TEST 6: an operator's endpoint that cannot open a record (a dictionary it lacks, a smaller limit): not judged there, purged only when forced
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::not_judged_here()
--- request
GET /_count/j/1
--- error_code: 200
--- response_body: 1
--- error_log eval
qr/\[warn\] .*purged the unjudged record under "idem:[0-9a-f]{64}" \(not judged here, forced/



=== TEST 7: a compressed record larger than an operator's endpoint's limit is never opened there, damaged or not
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::never_inflated()
--- request
GET /_count/k/1
--- error_code: 200
--- response_body: 1
