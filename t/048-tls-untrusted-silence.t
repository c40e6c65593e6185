# A Redis reached over TLS is told nothing before its certificate has
# passed: neither AUTH (and its password) nor the claim queued behind the
# connect leaves until the chain and the name are checked
# (docs/design.md#store-unavailable: a refusal is a store that cannot be
# reached). In Redis's place here is a TLS server that records every byte
# it receives after the handshake (openssl s_server, t/lib/Idem/TlsListener.pm):
# one whose certificate comes from a CA the gateway does not trust
# (TEST 1-2), one trusted but for another name (TEST 3-4). Each completes
# handshakes with the gateway and must receive nothing at all; the request
# gets 503 and nothing is executed.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::TlsListener;
use Test::Nginx::Socket 'no_plan';

our $tls = tls_files();
our $untrusted = Idem::TlsListener->start($tls->{'other-server'}, $tls->{'other-server-key'});
our $wrong_name = Idem::TlsListener->start($tls->{'wrong-name'}, $tls->{'wrong-name-key'});
$ENV{TEST_NGINX_UNTRUSTED_PORT} = $untrusted->port;
$ENV{TEST_NGINX_WRONG_NAME_PORT} = $wrong_name->port;

# What $listener was told. The gateway closes a connection it refused; once
# the server's end of every connection is closed too, s_server has read
# each to its end, and whatever they carried has been recorded.
sub main::told_nothing {
    my ($listener, $what) = @_;
    Test::More::ok(IdempotencyTest::wait_until(sub { !$listener->open_connections }, 10),
                   "$what: the gateway's connections are over")
        or Test::More::diag("still open (states): @{[$listener->open_connections]}; s_server said: " . $listener->log);
    my $got = $listener->received;
    Test::More::is(length $got, 0, "$what: the server received nothing after the handshake")
        or Test::More::diag("received: " . join '', map { /[[:print:]]/ ? $_ : sprintf '\\x%02x', ord } split //, $got);
    Test::More::ok(index($got, 'untold-secret') < 0, "$what: not the password");
    Test::More::ok($got !~ /AUTH|SET/i, "$what: not AUTH, not the claim");
    Test::More::is(upstream_count('/untold'), 0, "$what: nothing executed");
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a TLS server whose certificate the gateway does not trust: 503, refused for its CA
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_UNTRUSTED_PORT ssl password=untold-secret-6021;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /untold
x
--- more_headers
Idempotency-Key: untold-1
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: TLS failed: unknown CA/
--- no_error_log
untold-secret


=== TEST 2: ... and it was told nothing: no AUTH, no password, no claim
--- init
main::told_nothing($main::untrusted, 'untrusted CA');
--- config
location = /t { return 200 "checked\n"; }
--- request
GET /t
--- response_body
checked


=== TEST 3: a TLS server with a trusted certificate for another name: 503, refused for the name
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_WRONG_NAME_PORT ssl password=untold-secret-6021;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
--- config
location / {
    idempotency on;
    proxy_pass http://backend;
}
--- request
POST /untold
x
--- more_headers
Idempotency-Key: untold-3
--- error_code: 503
--- error_log eval
qr/\[error\] .*idempotency: Redis 127\.0\.0\.1:\d+: TLS failed: name mismatch/
--- no_error_log
untold-secret


=== TEST 4: ... and it was told nothing either
--- init
main::told_nothing($main::wrong_name, 'wrong name');
--- config
location = /t { return 200 "checked\n"; }
--- request
GET /t
--- response_body
checked
