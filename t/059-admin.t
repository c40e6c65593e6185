# The operator's endpoint (docs/design.md#inspect-and-purge):
# `idempotency_admin` inspects the record under a key — named by the key in
# the Idempotency-Key header with ?scope= (and ?server=), or by its hash —
# and answers JSON: the state (absent, claimed and by whom, stored,
# unreplayable), the stored status, header count and body size, expiry,
# the fingerprint's first bytes, whether it is encrypted, and what a
# request with the key would get now. DELETE purges a stored or
# unreplayable record, refuses (409) a claim in flight unless forced, and
# logs who asked at notice. The location's access rules (deny, auth_basic)
# guard it. Nothing it answers holds the raw key, a response body, or
# anything decrypted. Runs on Redis, on the zone store and on a Redis
# Cluster; a Sentinel deployment in its own block (--- redis_only).
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf idem_location post summary);
use Test::Nginx::Socket 'no_plan';

use Idem::FaultProxy ();
use JSON::PP ();
use Sys::Hostname ();
use Time::HiRes qw(time);

start_redis_sentinel() if ($ENV{TEST_NGINX_IDEM_STORE} // 'redis') eq 'redis';

# Redis behind a proxy that holds back chosen replies (TEST 15).
our $PROXY = Idem::FaultProxy::fault_proxy_start(IdempotencyTest::redis_port());
$ENV{TEST_NGINX_FAULT_PORT} = $PROXY->{port};

master_on();
workers(2);
test_nginx_defaults();

our $KEY_HEX = '7a' x 32;

add_block_preprocessor(sub {
    my $block = shift;
    # "alice:secret" for auth_basic, and an encryption key
    $block->set_value('user_files', ">>> admins\nalice:{PLAIN}secret\n>>> seal.key\n$KEY_HEX\n")
        unless defined $block->user_files;
});

run_tests();

# The API location (scope from X-Tenant) and the admin endpoint beside it.
sub locations {
    my (@admin) = @_;
    return idem_location('idempotency_scope $http_x_tenant', 'idempotency_max_response_size 200')
         . location_conf('/_admin', @admin, 'idempotency_admin');
}

# An admin request: $method, the query, the key header (undef: none), more
# header lines; returns {status, headers, body, json (decoded, or undef)}.
sub admin {
    my ($method, $query, $key, $more) = @_;
    my $req = "$method /_admin" . ($query ne '' ? "?$query" : '') . " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            . (defined $key ? "Idempotency-Key: $key\r\n" : '') . ($more // '') . ($main::AUTH // '') . "\r\n";
    my $res = IdempotencyTest::read_response(IdempotencyTest::send_request($req));
    $res->{json} = eval { JSON::PP::decode_json($res->{body}) };
    return $res;
}

sub tenant_post {
    my ($uri, $key, $tenant) = @_;
    my $sock = IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nX-Tenant: $tenant\r\nContent-Length: 1\r\n\r\nx");
    return IdempotencyTest::read_response($sock);
}

sub key_hash { substr(IdempotencyTest::redis_key($_[0], $_[1] // ''), length 'idem:') }

# The record under a client key as the store holds it (Redis, the
# cluster); undef on the zone, which nothing outside nginx reads.
sub raw_record {
    my ($key, $scope) = @_;
    return undef if Idem::Store::on_zone();
    my $rkey = IdempotencyTest::redis_key($key, $scope);
    my ($at) = Idem::Store::on_cluster() ? IdempotencyTest::cluster_owner($rkey) : (IdempotencyTest::redis_port());
    return IdempotencyTest::redis_command_at($at, 'GET', $rkey);
}

# A request with a Host and more header lines; the response read.
sub request_to {
    my ($method, $uri, $host, @headers) = @_;
    my $body = $method eq 'POST' ? 'x' : '';
    return IdempotencyTest::read_response(IdempotencyTest::send_request(
        "$method $uri HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n" . join('', map { "$_\r\n" } @headers)
        . ($body ne '' ? 'Content-Length: ' . length($body) . "\r\n" : '') . "\r\n$body"));
}

# The endpoint inside a server whose requests are protected, DELETE among
# their methods: the operator's purge is never itself claimed under the
# key it purges.
sub inside_protected_server {
    my $first = request_to('POST', '/a/12', 'localhost', 'Idempotency-Key: admin-12', 'X-User: u1');
    Test::More::is("$first->{status} $first->{headers}{'x-idempotency-status'}", '201 new', 'the client\'s original');
    my $purge = request_to('DELETE', '/_idem?scope=u1', 'localhost', 'Idempotency-Key: admin-12', 'X-User: u1');
    Test::More::is($purge->{status}, 200, 'the operator\'s DELETE purges');
    Test::More::is($purge->{headers}{'x-idempotency-status'} // '', '', '... and is no protected request');
    my $j = eval { JSON::PP::decode_json($purge->{body}) } // {};
    Test::More::is($j->{purged}, JSON::PP::true, '... purged: true');
    my $after = request_to('GET', '/_idem?scope=u1', 'localhost', 'Idempotency-Key: admin-12', 'X-User: u1');
    Test::More::is((eval { JSON::PP::decode_json($after->{body}) } // {})->{state}, 'absent',
                   'nothing is left under the key, no claim nor answer of the purge');
    my $retry = request_to('POST', '/a/12', 'localhost', 'Idempotency-Key: admin-12', 'X-User: u1');
    Test::More::is("$retry->{status} $retry->{headers}{'x-idempotency-status'}", '201 new',
                   'the client\'s retry executes again: never 422');
}

# ?server= names a virtual server as nginx matches a Host: any of its
# names (exact, wildcard, regular expression), in any case.
sub server_names {
    my $first = request_to('POST', '/a/13', 'alias.example.com', 'Idempotency-Key: admin-13');
    Test::More::is($first->{status}, 201, 'stored through the API server, by one of its other names');
    for my $name ('api.example.com', 'API.Example.COM', 'alias.example.com', 'ALIAS.EXAMPLE.COM.', 'eu.example.org',
                  'r7.example.net') {
        my $got = admin("GET", "server=$name", "admin-13");
        Test::More::is($got->{json}{state}, 'stored', "?server=$name: the API server's record");
    }
    Test::More::is(admin('GET', 'server=other.example.com', 'admin-13')->{json}{state}, 'absent',
                   '?server= of no such server: absent');
}

# The proxy has passed on Redis's reply to every command sent so far: a
# fault set now meets only what comes after it.
sub proxy_quiet {
    IdempotencyTest::wait_until(sub {
        my $st = Idem::FaultProxy::fault_proxy_stats($PROXY);
        $st->{replies} >= $st->{commands};
    }, 10) or die "Redis's replies through the proxy never caught up\n";
}

# The store answers the peek at once but holds back its answer to the purge
# (3 s, six times idempotency_redis_timeout): the DELETE gets 503 once that
# timeout passed, from its own deadline (not from the connection, which
# Redis's silence drops at twice the timeout), not the purge's late answer.
# The purge is the one command that carries the record it read, whose
# body (upstream.pl's JSON) names the path.
sub purge_unanswered {
    Test::More::is(post('/a/15', 'admin-15')->{status}, 201, 'the original');
    proxy_quiet();
    my $before = Idem::FaultProxy::fault_proxy_stats($PROXY);
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'stall', 3000, '"/a/15"');
    my $t0 = time;
    my $purge = admin('DELETE', '', 'admin-15');
    my $took = time - $t0;
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    Test::More::is("$purge->{status} " . ($purge->{json}{type} // '-'), '503 urn:nginx-idempotency:problem:store-unavailable',
                   'the purge unanswered: 503');
    Test::More::is($purge->{json}{detail}, 'the store did not answer in time',
                   '... at the purge\'s own deadline')
        or Test::More::diag($purge->{body});
    Test::More::is($purge->{headers}{'retry-after'}, 1, '... with Retry-After');
    Test::More::cmp_ok($took, '<', 2.5, sprintf('... once idempotency_redis_timeout (500 ms) passed, not the store\'s '
                                                . 'answer 3 s later (%.2f s)', $took));
    Test::More::is(Idem::FaultProxy::fault_proxy_stats($PROXY)->{stalled} - $before->{stalled}, 1,
                   'the purge\'s answer was held back, the peek\'s not');
    # the connection Redis held back is dropped (twice the timeout), or
    # its answer comes: the inspection below meets a connection of its own
    IdempotencyTest::wait_until(sub {
        IdempotencyTest::error_log_has('nothing from Redis for twice idempotency_redis_timeout', 0)
            || Idem::FaultProxy::fault_proxy_stats($PROXY)->{late} > $before->{late};
    }, 10) or die "the held-back connection never ended\n";
    # ... and the peek's (the one script that holds PTTL)
    Test::More::is(post('/a/15', 'admin-15b')->{status}, 201, 'another original');
    proxy_quiet();
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'stall', 3000, "'PTTL'");
    $t0 = time;
    my $inspection = admin('GET', '', 'admin-15b');
    $took = time - $t0;
    Idem::FaultProxy::fault_proxy_mode($PROXY, 'pass');
    Test::More::is("$inspection->{status} " . ($inspection->{json}{detail} // '-'),
                   '503 the store did not answer in time', 'an inspection unanswered: 503, at its own deadline');
    Test::More::cmp_ok($took, '<', 2.5, sprintf('... once idempotency_redis_timeout passed (%.2f s)', $took));
}

# What no answer of the endpoint may hold.
sub nothing_raw {
    my ($name, $res, $key) = @_;
    Test::More::unlike($res->{body}, qr/\Q$key\E/, "$name: the raw key is not in the answer");
    Test::More::unlike($res->{body}, qr/execution|body_sha256/, "$name: nor the response's body");
}

sub stored_response {
    my $res = tenant_post('/a/1', 'admin-1', 'acme');
    Test::More::is($res->{status}, 201, 'the original is answered');
    my $body_bytes = length $res->{body};
    my $from = time;
    my $got = admin('GET', 'scope=acme', 'admin-1');
    Test::More::is($got->{status}, 200, 'inspected: 200');
    Test::More::like($got->{headers}{'content-type'}, qr{\Aapplication/json}, 'as JSON');
    my $j = $got->{json} or return Test::More::fail("not JSON: $got->{body}");
    Test::More::is($j->{state}, 'stored', 'state: stored');
    Test::More::is($j->{key_hash}, key_hash('admin-1', 'acme'), 'the key hash is the store key\'s');
    Test::More::is($j->{response}{status}, 201, 'the stored status');
    Test::More::is($j->{response}{body_bytes}, $body_bytes, 'the body size');
    Test::More::cmp_ok($j->{response}{headers}, '>=', 2, 'the header count');
    Test::More::like($j->{fingerprint}, qr/\A[0-9a-f]{16}\z/, 'the fingerprint, keyed');
    if (defined(my $raw = raw_record('admin-1', 'acme'))) {
        # the fingerprint itself is an unsalted SHA-256 of method, URI and
        # body: its first bytes would let a small body be guessed
        Test::More::isnt($j->{fingerprint}, unpack('H16', substr($raw, 5, 8)), '... not the digest\'s own first bytes');
    }
    Test::More::ok(!$j->{encrypted}, 'not encrypted');
    Test::More::cmp_ok($j->{ttl_ms}, '>', 3_500_000, 'expires in about idempotency_ttl (1h)');
    Test::More::like($j->{expires_at}, qr/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/, 'expires_at is an ISO time');
    Test::More::like($j->{next_request}, qr/replayed \(status 201\)/, 'a retry would be replayed');
    nothing_raw('stored', $got, 'admin-1');
    my $other = admin('GET', 'scope=other', 'admin-1');
    Test::More::is($other->{json}{state}, 'absent', 'another scope: absent');
    Test::More::like($other->{json}{next_request}, qr/first execution/, '... a request would execute');
    my $server = admin('GET', 'scope=acme&server=api.example.com', 'admin-1');
    Test::More::is($server->{json}{state}, 'absent', 'another virtual server: absent');
    my $by_hash = admin('GET', 'hash=' . uc key_hash('admin-1', 'acme'), undef);
    Test::More::is($by_hash->{json}{state}, 'stored', 'by its hash (any case): the same record');
    Test::More::is($by_hash->{json}{key_hash}, key_hash('admin-1', 'acme'), '... the same key hash');
}

sub claimed {
    my $original = IdempotencyTest::start_in_flight('/a/2?sleep=1', 'admin-2');
    my $got = admin('GET', '', 'admin-2');
    my $j = $got->{json} or return Test::More::fail("not JSON: $got->{body}");
    Test::More::is($j->{state}, 'claimed', 'state: claimed');
    Test::More::is($j->{claim}{gateway}, lc Sys::Hostname::hostname(), 'claimed by this gateway (host name)');
    my %workers = map { $_ => 1 } IdempotencyTest::worker_pids();
    Test::More::ok($workers{ $j->{claim}{worker_pid} }, "by one of its workers: $j->{claim}{worker_pid}");
    Test::More::is($j->{claim}{lock_ttl_ms}, 30000, 'renewed with lock_ttl 30 s');
    Test::More::like($j->{claim}{claimed_at}, qr/\A\d{4}-\d\d-\d\dT/, 'since when');
    Test::More::ok(defined $j->{claim}{last_renewal}, 'its last renewal');
    Test::More::like($j->{next_request}, qr/\A409/, 'a retry would get 409');
    my $refused = admin('DELETE', '', 'admin-2');
    Test::More::is($refused->{status}, 409, 'a claim in flight is not purged');
    Test::More::is($refused->{json}{purged}, JSON::PP::false, '... purged: false');
    Test::More::like($refused->{json}{reason}, qr/force=1/, '... and the reason says how');
    Test::More::is(admin('GET', '', 'admin-2')->{json}{state}, 'claimed', 'the claim stays');
    my $forced = admin('DELETE', 'force=1', 'admin-2');
    Test::More::is($forced->{status}, 200, 'forced: purged');
    Test::More::is($forced->{json}{inspection}{state}, 'claimed', '... what was purged');
    Test::More::ok(IdempotencyTest::error_log_has('purged the claimed record under "idem:' . key_hash('admin-2')
                   . '" (a claim in flight, forced'), 'the forced purge is logged');
    Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, 'the original still answers');
}

# The admin's credentials (alice:secret), when the endpoint asks for them.
our $AUTH;

sub purge_stored {
    local $AUTH = "Authorization: Basic YWxpY2U6c2VjcmV0\r\n";
    Test::More::is(post('/a/3', 'admin-3')->{status}, 201, 'the original');
    my $purged = admin('DELETE', '', 'admin-3');
    Test::More::is($purged->{status}, 200, 'a stored response is purged');
    Test::More::is($purged->{json}{purged}, JSON::PP::true, '... purged: true');
    Test::More::is($purged->{json}{inspection}{state}, 'stored', '... it was stored');
    nothing_raw('purge', $purged, 'admin-3');
    Test::More::ok(IdempotencyTest::error_log_has('purged the stored record under "idem:' . key_hash('admin-3')
                   . '", asked by 127.0.0.1, user "alice"'), 'logged with who asked');
    Test::More::is(admin('GET', '', 'admin-3')->{json}{state}, 'absent', 'nothing is left');
    Test::More::is(summary(post('/a/3', 'admin-3')), '201 new 2', 'a retry executes again');
    # force=1 forces nothing on a stored response: an ordinary purge, logged so
    Test::More::is(post('/a/3', 'admin-3f')->{status}, 201, 'another original');
    my $forced = admin('DELETE', 'force=1', 'admin-3f');
    Test::More::is("$forced->{status} " . ($forced->{json}{inspection}{state} // '-'), '200 stored',
                   'a stored response purged with force=1');
    Test::More::ok(IdempotencyTest::error_log_has('purged the stored record under "idem:' . key_hash('admin-3f')
                   . '", asked by'), '... logged as an ordinary purge, not a forced one');
    my $again = admin('DELETE', '', 'admin-nothing');
    Test::More::is($again->{status}, 404, 'nothing to purge: 404');
    Test::More::is($again->{json}{purged}, JSON::PP::false, '... purged: false');
}

sub unreplayable {
    Test::More::is(post('/a/4?size=300', 'admin-4')->{status}, 201, 'a response over the size limit');
    IdempotencyTest::wait_until(sub { admin('GET', '', 'admin-4')->{json}{state} ne 'claimed' });
    my $j = admin('GET', '', 'admin-4')->{json};
    Test::More::is($j->{state}, 'unreplayable', 'state: unreplayable');
    Test::More::is($j->{unreplayable}{status}, 201, 'the status it had');
    Test::More::like($j->{unreplayable}{why}, qr/idempotency_max_response_size/, 'why');
    Test::More::like($j->{next_request}, qr/\A410/, 'a retry would get 410');
    Test::More::is(admin('DELETE', '', 'admin-4')->{status}, 200, 'the marker is purged');
    Test::More::is(summary(post('/a/4?size=10', 'admin-4')), '201 new 2', 'then a retry executes again');
}

sub encrypted {
    Test::More::is(post('/a/5', 'admin-5')->{status}, 201, 'the original, sealed at rest');
    my $got = admin('GET', '', 'admin-5');
    my $j = $got->{json} or return Test::More::fail("not JSON: $got->{body}");
    Test::More::is($j->{state}, 'stored', 'state: stored');
    Test::More::ok($j->{encrypted}, 'encrypted');
    Test::More::ok(!exists $j->{response} && !exists $j->{fingerprint}, 'nothing decrypted: no status, no fingerprint');
    Test::More::like($j->{next_request}, qr/opens with a configured idempotency_encrypt_key/, 'what a retry gets');
    nothing_raw('encrypted', $got, 'admin-5');
}

sub bad_requests {
    my $none = admin('GET', '', undef);
    Test::More::is($none->{status}, 400, 'no key: 400');
    Test::More::like($none->{headers}{'content-type'}, qr{problem\+json}, '... as problem+json');
    Test::More::is(admin('GET', 'hash=' . ('a' x 64), 'both')->{status}, 400, 'a key and a hash: 400');
    Test::More::is(admin('GET', 'hash=xyz', undef)->{status}, 400, 'a bad hash: 400');
    Test::More::is(admin('GET', 'hash=' . ('a' x 63), undef)->{status}, 400, 'a hash of 63 hex digits: 400');
    Test::More::is(admin('GET', 'hash=' . ('a' x 65), undef)->{status}, 400, '... of 65: 400');
    Test::More::is(admin('GET', '', '"unterminated')->{status}, 400, 'an invalid key: 400');
    my $post = admin('POST', '', 'admin-6');
    Test::More::is($post->{status}, 405, 'POST: 405');
    Test::More::is($post->{headers}{allow}, 'GET, HEAD, DELETE', '... with Allow');
}

# scripts/idempotency-admin against the endpoint: its output and exit code.
sub client {
    my (@args) = @_;
    my $url = 'http://127.0.0.1:' . IdempotencyTest::nginx_port() . '/_admin';
    open my $fh, '-|', "$ENV{TEST_NGINX_REPO}/scripts/idempotency-admin", '--url', $url, @args
        or die "idempotency-admin: $!\n";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

sub with_client {
    Test::More::is(tenant_post('/a/11', 'admin-11', 'acme')->{status}, 201, 'the original');
    my ($rc, $out) = client('--scope', 'acme', '--user', 'alice:secret', 'inspect', 'admin-11');
    Test::More::is($rc, 0, 'inspect: exit 0');
    Test::More::like($out, qr/"state": "stored"/, '... prints the inspection');
    Test::More::like($out, qr/\A\{\n    "key_hash": "[0-9a-f]+",\n    "store": "/,
                     '... indented, in the endpoint\'s order, whatever else is installed');
    ($rc, $out) = client('--user', 'alice:secret', 'inspect', 'admin-11');
    Test::More::like($out, qr/"state": "absent"/, 'without the scope: absent');
    ($rc, $out) = client('--scope', 'acme', 'purge', 'admin-11');
    Test::More::is($rc, 1, 'without credentials: exit 1');
    ($rc, $out) = client('--user', 'alice:secret', 'purge-hash', key_hash('admin-11', 'acme'));
    Test::More::is($rc, 0, 'purge by hash: exit 0');
    Test::More::like($out, qr/"purged": true/, '... purged');
    ($rc, $out) = client('--user', 'alice:secret', 'purge-hash', key_hash('admin-11', 'acme'));
    Test::More::is($rc, 1, 'again: nothing to purge, exit 1');
    Test::More::ok(IdempotencyTest::error_log_has('user "alice"'), 'the purge is logged with its user');
}

__DATA__

=== TEST 1: a stored response: its state, status, sizes, expiry and what a retry gets; by scope, server and hash
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_ttl 1h;
--- config eval
main::locations()
--- init
main::stored_response();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 2: a claim in flight: who holds it; a purge is refused unless forced, and the forced one is logged
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::claimed();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 3: a purge of a stored response, logged at notice with who asked (with force=1 too); the retry executes again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('auth_basic admin', 'auth_basic_user_file ../html/admins')
--- init
main::purge_stored();
--- request
GET /_health
--- error_log eval
qr/\[notice\] .*purged the stored record under "idem:[0-9a-f]{64}", asked by 127\.0\.0\.1, user "alice"/
--- no_error_log
[error]
forced


=== TEST 4: the marker of an unreplayable response: inspected and purged
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::unreplayable();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 5: a sealed record: encrypted, nothing of it decrypted
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_encrypt_key ../html/seal.key;
--- config eval
main::locations()
--- init
main::encrypted();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 6: bad requests: no key, key and hash, a bad hash, an invalid key, another method
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations()
--- init
main::bad_requests();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 7: the location's access rules guard it: a stranger is denied, and nothing is purged
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('allow 127.0.0.2', 'deny all')
--- init
Test::More::is(main::post('/a/7', 'admin-7')->{status}, 201, 'the original');
--- request eval
["DELETE /_admin", "GET /_admin"]
--- more_headers
Idempotency-Key: admin-7
--- error_code eval
[403, 403]
--- response_body_unlike eval
[qr/purged|state/, qr/purged|state/]
--- error_log
access forbidden by rule


=== TEST 8: ... auth_basic: without credentials 401, and the record stays
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('auth_basic admin', 'auth_basic_user_file ../html/admins')
--- init
Test::More::is(main::post('/a/8', 'admin-8')->{status}, 201, 'the original');
--- request eval
["DELETE /_admin", "POST /a/8\nx"]
--- more_headers
Idempotency-Key: admin-8
--- error_code eval
[401, 201]
--- response_headers eval
["", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1"]


=== TEST 9: scripts/idempotency-admin: inspect and purge, by key and scope or by hash, with credentials
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::locations('auth_basic admin', 'auth_basic_user_file ../html/admins')
--- init
main::with_client();
--- request
GET /_health
--- no_error_log
[error]


=== TEST 10: through Sentinel: the master's record is inspected and purged
--- redis_only
--- http_config
idempotency_redis_sentinel mymaster 127.0.0.1:$TEST_NGINX_SENTINEL_PORT;
--- config eval
main::locations()
--- init
Test::More::is(main::post('/a/9', 'admin-9')->{status}, 201, 'the original');
my $j = main::admin('GET', '', 'admin-9')->{json};
Test::More::is($j->{state}, 'stored', 'stored, read from the master');
Test::More::like($j->{store}, qr/\Aredis sentinel /, 'the store named');
Test::More::is(main::admin('DELETE', '', 'admin-9')->{status}, 200, 'purged');
Test::More::is(IdempotencyTest::redis_command_at($ENV{TEST_NGINX_MASTER_PORT}, 'EXISTS', IdempotencyTest::redis_key('admin-9')), 0,
               'gone from the master');
--- request
GET /_health
--- no_error_log
[error]


=== TEST 11: nginx -t: idempotency_admin without a store is refused, naming the directive
--- config
location /_admin { idempotency_admin; }
--- must_die
--- error_log
"idempotency_admin" needs a store:



=== TEST 12: inside a server whose DELETEs are protected, the endpoint is not: the purge is no claim, and the client's retry executes again
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
idempotency on;
idempotency_methods POST PATCH DELETE;
idempotency_scope $http_x_user;
add_header X-Idempotency-Status $idempotency_status always;
location / { proxy_pass http://backend; }
location = /_idem { idempotency_admin; }
--- init
main::inside_protected_server();
--- request
GET /_count/a/12
--- error_code: 200
--- response_body: 2
--- no_error_log
[error]



=== TEST 13: nginx -t: idempotency on and idempotency_admin in one location are refused, naming both
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /_admin { idempotency on; idempotency_admin; }
--- must_die
--- error_log
"idempotency on" and "idempotency_admin" in one location



=== TEST 14: ?server= names a virtual server as nginx matches names: any of its names, any case
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen $TEST_NGINX_SERVER_PORT;
    server_name API.Example.com alias.example.com *.example.org ~^r\d+\.example\.net$;
    location / { idempotency on; proxy_pass http://backend; }
}
--- config eval
main::locations()
--- init
main::server_names();
--- request
GET /_count/a/13
--- error_code: 200
--- response_body: 1
--- no_error_log
[error]


=== TEST 15: a store that answers the peek but not the purge, or not the peek: 503 within idempotency_redis_timeout
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_FAULT_PORT;
idempotency_redis_timeout 500ms;
--- config eval
main::locations()
--- init
main::purge_unanswered();
--- request
GET /_health
--- error_log eval
[qr/\[error\] .*the store did not answer the operator's purge of "idem:[0-9a-f]{64}" within 500 ms/,
 qr/\[error\] .*the store did not answer the operator's inspection of "idem:[0-9a-f]{64}" within 500 ms/]


=== TEST 16: a sealed record cut short, or with its magic altered, is unusable (410), never foreign (503)
--- redis_only
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_encrypt_key ../html/seal.key;
--- config eval
main::locations()
--- init
for my $case (['cut short', 'admin-16a', sub { substr($_[0], 0, 20) }],
              ['its magic altered', 'admin-16b', sub { my $v = $_[0]; substr($v, 0, 1) = 'X'; $v }]) {
    my ($what, $key, $damage) = @$case;
    Test::More::is(main::post('/a/16', $key)->{status}, 201, "the original, sealed ($what)");
    my $rkey = IdempotencyTest::redis_key($key);
    IdempotencyTest::redis_command('SET', $rkey, $damage->(IdempotencyTest::redis_command('GET', $rkey)));
    my $j = main::admin('GET', '', $key)->{json};
    Test::More::is($j->{state}, 'unusable', "$what: state unusable");
    Test::More::like($j->{next_request}, qr/\A410 response-unverifiable/, "$what: a retry would get 410");
    Test::More::is(main::post('/a/16', $key)->{status}, 410, "$what: a retry gets 410");
}
--- request
GET /_count/a/16
--- response_body: 2
