# Compressed records (docs/design.md#compressed-records): with
# idempotency_compress on (the default) a response is kept as a zstd frame
# when that makes its record smaller, and replayed byte for byte; a small
# or incompressible one, or any with idempotency_compress off, is kept as
# it was. Records of either form are read by every location, whatever its
# own setting; a compressed record that does not open, or of a form this
# release does not know, is answered 410 and never executed again. With
# encryption at rest the record is compressed before it is sealed. The
# operator's inspection tells which form a record has.
# Runs on Redis and on the zone store (the blocks marked --- redis_only,
# which read or alter the record in Redis, on Redis only).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf post);
use Test::Nginx::Socket 'no_plan';

use Digest::SHA qw(sha256_hex);
use JSON::PP ();

master_on();
workers(2);
test_nginx_defaults();

our $KEY_HEX = '5e' x 32;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('user_files', ">>> seal.key\n$KEY_HEX\n") unless defined $block->user_files;
});

run_tests();

# The API location, another for the same URIs with compression off
# (reached by X-Plain: 1, so both share one key space and one
# fingerprint), the admin endpoint and the metrics.
sub locations {
    my (@more) = @_;
    return location_conf('/', 'error_page 418 = @plain', 'if ($http_x_plain) { return 418; }', 'idempotency on',
                         @more, 'add_header X-Idempotency-Status $idempotency_status always',
                         'proxy_pass http://backend')
         . location_conf('@plain', 'idempotency on', 'idempotency_compress off', @more,
                         'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
         . location_conf('/_admin', @more, 'idempotency_admin')
         . location_conf('= /metrics', 'idempotency_metrics');
}

# A POST of $uri with $key, X-Plain: 1 when $plain.
sub send_post {
    my ($uri, $key, $plain) = @_;
    return IdempotencyTest::post_key($uri, $key, $plain ? ('X-Plain: 1') : ());
}

sub inspect { IdempotencyTest::admin_inspect(@_) }

# The original, then its retry: the retry is the replay, byte for byte.
sub new_then_replay {
    my ($name, $uri, $key, $plain_first, $plain_retry) = @_;
    my $first = send_post($uri, $key, $plain_first);
    Test::More::is("$first->{status} $first->{headers}{'x-idempotency-status'}", '201 new', "$name: the original");
    my $retry = send_post($uri, $key, $plain_retry);
    Test::More::is("$retry->{status} " . ($retry->{headers}{'x-idempotency-status'} // '-') . ' '
                   . ($retry->{headers}{'idempotent-replayed'} // '-'), '201 replayed true', "$name: the retry is a replay");
    Test::More::is(length $retry->{body}, length $first->{body}, "$name: of the same length");
    Test::More::ok(sha256_hex($retry->{body}) eq sha256_hex($first->{body}), "$name: byte for byte");
    Test::More::is($retry->{headers}{'content-type'}, $first->{headers}{'content-type'}, "$name: the same type");
    (my $path = $uri) =~ s/\?.*//;
    Test::More::is(IdempotencyTest::upstream_count($path), 1, "$name: executed once");
    return ($first, inspect($key));
}

sub metric {
    my ($name) = @_;
    my $page = IdempotencyTest::read_response(IdempotencyTest::send_request(
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))->{body};
    return $page =~ /^\Q$name\E (\d+)$/m ? $1 : undef;
}

sub compressed_kinds {
    for my $kind (qw(list payment transcript document)) {
        my ($first, $j) = new_then_replay($kind, "/z/$kind?kind=$kind", "z-$kind");
        Test::More::is($j->{state}, 'stored', "$kind: stored");
        Test::More::is($j->{compressed}, JSON::PP::true, "$kind: compressed");
        Test::More::is($j->{response}{body_bytes}, length $first->{body}, "$kind: the body it holds is the whole body");
        Test::More::cmp_ok($j->{record_bytes}, '<', $j->{plain_bytes} * 0.75,
                           "$kind: the record ($j->{record_bytes} bytes) is smaller than the plain one ($j->{plain_bytes})");
        Test::More::cmp_ok($j->{plain_bytes}, '>', length $first->{body}, "$kind: which holds the body and its head");
    }
    Test::More::cmp_ok(metric('idempotency_compressed_records_total'), '>=', 4, 'the records compressed are counted');
    Test::More::cmp_ok(metric('idempotency_compression_saved_bytes_total'), '>', 200_000, '... and the bytes saved');
}

sub kept_plain {
    for my $case (['small', '/p/small', 'p-small'], ['noise', '/p/noise?kind=noise&size=8192', 'p-noise'],
                  ['off', '/p/off?kind=list', 'p-off', 1]) {
        my ($name, $uri, $key, $plain) = @$case;
        my (undef, $j) = new_then_replay($name, $uri, $key, $plain, $plain);
        Test::More::is($j->{state}, 'stored', "$name: stored");
        Test::More::is($j->{compressed}, JSON::PP::false, "$name: kept as it was");
        Test::More::ok(!exists $j->{plain_bytes}, "$name: no plain size told");
    }
}

sub mixed {
    # written plain (compression off), read where compression is on
    my (undef, $plain) = new_then_replay('plain, then on', '/m/1?kind=list', 'm-1', 1, 0);
    Test::More::is($plain->{compressed}, JSON::PP::false, 'plain, then on: the record is the plain one');
    # written compressed, read where compression is off
    my (undef, $packed) = new_then_replay('compressed, then off', '/m/2?kind=list', 'm-2', 0, 1);
    Test::More::is($packed->{compressed}, JSON::PP::true, 'compressed, then off: the record is compressed');
}

sub sealed {
    my ($first, $j) = new_then_replay('sealed', '/s/1?kind=list', 's-1');
    Test::More::is($j->{encrypted}, JSON::PP::true, 'sealed: encrypted');
    Test::More::ok(!exists $j->{compressed}, 'sealed: whether it is compressed is not told');
    Test::More::cmp_ok($j->{record_bytes}, '<', length($first->{body}) / 2,
                       "sealed: the sealed record ($j->{record_bytes} bytes) was compressed before it was sealed");
}

sub in_redis {
    my $rkey = IdempotencyTest::redis_key('r-1');
    Test::More::is(send_post('/r/1?kind=list', 'r-1')->{status}, 201, 'the original');
    IdempotencyTest::wait_until(sub { IdempotencyTest::stored_kind($rkey) }) or die "not stored\n";
    my $value = IdempotencyTest::redis_command('GET', $rkey);
    Test::More::is(substr($value, 0, 5), "IDM\x03\x02", 'the record is a response of version 3');
    Test::More::is(substr($value, 39, 1), "\x01", '... zstd');
    Test::More::cmp_ok(length $value, '<', 20480 / 3, '... ' . length($value) . ' bytes for a 20 KB body');
}

# Rewrites the record of r-1 in Redis with $change (a sub altering $_[0]).
sub alter_record {
    my ($change) = @_;
    my $rkey = IdempotencyTest::redis_key('r-1');
    my $value = IdempotencyTest::redis_command('GET', $rkey) // die "no record for r-1\n";
    $change->($value);
    IdempotencyTest::redis_command('SET', $rkey, $value, 'PX', 600_000);
}

__DATA__

=== TEST 1: compressible responses are kept compressed and replayed byte for byte, executed once, counted
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::compressed_kinds()
--- request
GET /metrics
--- response_body_like: idempotency_compressed_records_total
--- no_error_log
[error]



=== TEST 2: a small response, an incompressible one, and any with idempotency_compress off are kept as they were
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::kept_plain()
--- request
GET /_count/p/off
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 3: mixed settings: a plain record is read where compression is on, a compressed one where it is off
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::mixed()
--- request
GET /_count/m/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 4: with encryption at rest the record is compressed, then sealed, and replayed
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('idempotency_encrypt_key ../html/seal.key')
--- init
main::sealed()
--- request
GET /_count/s/1
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]



=== TEST 5: in Redis, the compressed record is version 3, and far smaller than the body
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::in_redis()
--- request
GET /_count/r/1
--- error_code: 200
--- response_body: 1



=== TEST 6: a compressed record altered in Redis does not open: 410, logged
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::alter_record(sub { substr($_[0], length($_[0]) - 3, 1) ^= "\x55" });
--- request
POST /r/1?kind=list
x
--- more_headers
Idempotency-Key: r-1
--- error_code: 410
--- response_headers
X-Idempotency-Status: unreplayable
!Idempotent-Replayed
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: its compressed form does not open \(altered or cut short\)/



=== TEST 7: a compressed record of a form this release does not know is a later release's: 410, logged
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::alter_record(sub { substr($_[0], 39, 1) = "\x02" });
--- request
POST /r/1?kind=list
x
--- more_headers
Idempotency-Key: r-1
--- error_code: 410
--- response_body_like: response-unverifiable
--- error_log eval
qr/\[error\] .*the record under "idem:[0-9a-f]{64}" does not open: it is a record of a later release's layout/



=== TEST 8: ... and neither was executed again
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- request
GET /_count/r/1
--- error_code: 200
--- response_body: 1
