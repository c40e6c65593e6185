# idempotency_encrypt_key seals every record with a fresh random nonce
# (AES-256-GCM: a nonce used twice under one key gives away the XOR of the
# two plaintexts and lets anyone forge tags). The same response stored twice
# under the same key — stored, lost by Redis (a DEL here), executed again
# and stored again — must leave two envelopes that share neither nonce nor
# ciphertext, and each must still open. The upstream's execution counter is
# hidden from the client (proxy_hide_header) and the body is a fixed text,
# so the two records are the same bytes before sealing.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

our $KEY = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';

test_nginx_defaults();
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('user_files', ">>> seal.key\n$KEY\n");
});
run_tests();

# The envelope: "IDE\x01", the key id (4 bytes), the nonce (12), the
# ciphertext, the tag (16).
sub envelope {
    my ($value) = @_;
    return undef unless defined $value && length($value) > 36 && substr($value, 0, 4) eq "IDE\x01";
    return { nonce => substr($value, 8, 12), ciphertext => substr($value, 20, length($value) - 36) };
}

sub stored_twice {
    my ($uri, $key) = @_;
    my $rkey = redis_key($key);
    Test::More::is(nginx_post($uri, $key), 201, "$key: the first execution");
    my $first = IdempotencyTest::wait_until(sub { envelope(redis_command('GET', $rkey)) }, 10);
    Test::More::ok($first, "$key: stored sealed") or return;
    redis_command('DEL', $rkey);
    Test::More::is(nginx_post($uri, $key), 201, "$key: the record lost, the retry executes again");
    my $second = IdempotencyTest::wait_until(sub { envelope(redis_command('GET', $rkey)) }, 10);
    Test::More::ok($second, "$key: stored sealed again") or return;
    Test::More::is(upstream_count($uri), 2, "$key: two executions");
    Test::More::is(length $second->{ciphertext}, length $first->{ciphertext}, "$key: of the same length");
    Test::More::isnt(unpack('H*', $second->{nonce}), unpack('H*', $first->{nonce}), "$key: under another nonce");
    # Under a reused nonce equal plaintexts give equal ciphertexts; fresh
    # ones share a byte in about one position in 256.
    my $diff = $first->{ciphertext} ^ $second->{ciphertext};
    my $same = ($diff =~ tr/\0//);
    my $len = length $diff;
    Test::More::ok($same < $len / 16, "$key: ciphertexts alike in $same of $len bytes");
}

__DATA__

=== TEST 1: the same response stored twice under one key: two envelopes, different nonces and ciphertexts
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_encrypt_key ../html/seal.key;
    proxy_hide_header X-Upstream-Execution;
    proxy_pass http://backend;
}
--- init
main::stored_twice('/sealed/twice?size=200', 'seal-twice');
--- request
POST /sealed/twice?size=200
x
--- more_headers
Idempotency-Key: seal-twice
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
--- response_body_like: \A[a-zA-Z0-9\n]{200}\z
--- no_error_log
[error]
