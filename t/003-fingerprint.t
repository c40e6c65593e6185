# The same key with a different request is refused with 422: the fingerprint
# covers the method, the raw URI (path and query) and every byte of the body,
# in memory, in a temporary file or de-chunked (docs/design.md#mismatch).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: same key, different body: 422 problem; the first response still replays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /fp/1\namount=100", "POST /fp/1\namount=200", "POST /fp/1\namount=100"]
--- more_headers
Idempotency-Key: fp-body
--- error_code eval
[201, 422, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1",
 "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json\n!X-Upstream-Execution",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- raw_response_headers_like eval
[qr/\AHTTP\/1\.1 201 Created\r\n/, qr/\AHTTP\/1\.1 422 Unprocessable Content\r\n/, qr/\AHTTP\/1\.1 201 Created\r\n/]
--- response_body_like eval
[qr/"execution":1,/,
 qr/\A\{(?=.*"status":422[,}])(?=.*"type":")(?=.*"title":")(?=.*"detail":").*\}\z/s,
 qr/"execution":1,/]
--- no_error_log
[error]


=== TEST 2: same key, different query string: 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /fp/2?currency=EUR\nx", "POST /fp/2?currency=USD\nx", "GET /_count/fp/2"]
--- more_headers
Idempotency-Key: fp-query
--- error_code eval
[201, 422, 200]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/"status":422[,}]/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 3: same key, different method (PATCH after POST): 422
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- request eval
["POST /fp/3\nx", "PATCH /fp/3\nx", "GET /_count/fp/3"]
--- more_headers
Idempotency-Key: fp-method
--- error_code eval
[201, 422, 200]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/"status":422[,}]/, qr/\A1\z/]
--- no_error_log
[error]


=== TEST 4: a body buffered to a temporary file is hashed to its last byte
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
client_body_buffer_size 8k;
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
my $body = 'x' x 199999;
["POST /fp/4\n${body}a", "POST /fp/4\n${body}a", "POST /fp/4\n${body}b"]
--- more_headers
Idempotency-Key: fp-large
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true",
 "X-Idempotency-Status: mismatch\nContent-Type: application/problem+json"]
--- response_body_like eval
[qr/"execution":1,"body_length":200000,/, qr/"execution":1,"body_length":200000,/, qr/"status":422[,}]/]
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]


=== TEST 5: a chunked request body is fingerprinted like the same bytes with Content-Length
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /fp/5\n" . "6\r\namount\r\n4\r\n=100\r\n0\r\n\r\n",
 "POST /fp/5\namount=100",
 "POST /fp/5\n" . "6\r\namount\r\n4\r\n=200\r\n0\r\n\r\n"]
--- more_headers eval
["Idempotency-Key: fp-chunked\nTransfer-Encoding: chunked",
 "Idempotency-Key: fp-chunked",
 "Idempotency-Key: fp-chunked\nTransfer-Encoding: chunked"]
--- error_code eval
[201, 201, 422]
--- response_headers eval
["X-Idempotency-Status: new",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true",
 "X-Idempotency-Status: mismatch"]
--- response_body_like eval
[qr/"execution":1,"body_length":10,/, qr/"execution":1,"body_length":10,/, qr/"status":422[,}]/]
--- no_error_log
[error]


=== TEST 6: a large upload in a temporary file is hashed a slice at a time: another request on the worker is answered meanwhile
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /big/ {
    idempotency on;
    client_max_body_size 200m;
    client_body_buffer_size 16k;
    try_files /nonexistent @stored;
}
location @stored {
    return 201 "stored\n";
}
location = /probe {
    return 204;
}
--- init
use IO::Socket::INET;
use Time::HiRes ();
my $size = 96 * 1024 * 1024;
open my $errlog, '<', $Test::Nginx::Util::ErrLogFile or die "no error log: $!\n";
seek $errlog, 0, 2;
my $post = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => IdempotencyTest::nginx_port(), Proto => 'tcp')
    or die "connect: $!\n";
print {$post} "POST /big/6 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Idempotency-Key: fp-big\r\nContent-Length: $size\r\n\r\n";
my $chunk = 'x' x (1024 * 1024);
print {$post} $chunk for 1 .. $size / length $chunk;
$post->flush;
# the first slice of the hash is logged: send the probe now (the log is
# followed as it grows, a millisecond apart, for at most 30 s)
my ($hashing, $deadline) = (0, time + 30);
until ($hashing || time > $deadline) {
    while (my $line = <$errlog>) {
        $hashing = 1, last if $line =~ /fingerprinted \d+ of $size bytes/;
    }
    seek $errlog, 0, 1;
    Time::HiRes::sleep(0.001) unless $hashing;
}
die "the body was not hashed in slices\n" unless $hashing;
my $probe = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => IdempotencyTest::nginx_port(), Proto => 'tcp')
    or die "connect: $!\n";
print {$probe} "GET /probe HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
my $answer = do { local $/; <$probe> } // '';
Test::More::like($answer, qr{\AHTTP/1\.1 204 }, 'TEST 6: the probe is answered');
my $stored = do { local $/; <$post> } // '';
Test::More::like($stored, qr{\AHTTP/1\.1 201 .*\r\n\r\nstored\n\z}s, 'TEST 6: the upload is answered after its hash');
seek $errlog, 0, 0;
my ($first, $last, $probed, $i) = (undef, undef, undef, 0);
while (my $line = <$errlog>) {
    if ($line =~ /fingerprinted (\d+) of $size bytes/) {
        $first //= $i;
        $last = $i if $1 == $size;
    }
    $probed //= $i if $line =~ m{"GET /probe HTTP/1\.1"};
    $i++;
}
Test::More::ok(defined $first && defined $last && defined $probed && $first < $probed && $probed < $last,
               'TEST 6: the probe was served between the first and the last slice of the hash')
    or Test::More::diag("first slice at line " . ($first // '-') . ", last at " . ($last // '-') . ", probe at " . ($probed // '-'));
--- request
GET /probe
--- error_code: 204
