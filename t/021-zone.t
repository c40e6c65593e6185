# What only the store in nginx shared memory has (`idempotency_zone`
# defines a zone, `idempotency_store zone=NAME` selects it; no Redis is
# configured in any block), across the two workers every block runs with:
# a claim outlives its workers and expires by TTL; a full zone never evicts
# a live record (a claim that finds no room follows idempotency_fail_open, a
# response that finds none leaves the unreplayable marker: 410, never a
# second execution); records survive `nginx -s reload`; both workers see
# one zone; records are sealed in it. When records expire:
# t/033-zone-expiry.t. The rules that hold on every store (replay,
# fingerprints, in-flight duplicates and waits, releases, size limits,
# scopes) are tested once, by the store-agnostic files that `make prove`
# runs on Redis and again on the zone store (STORE_AGNOSTIC_TESTS in the
# Makefile).
#
# Helpers below run in `--- init`: they talk to nginx on their own
# connections, reload it (SIGHUP to the master, then wait for the new
# workers), and fill a zone.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(idem_location location_conf);
use Test::Nginx::Socket 'no_plan';

use IO::Socket::INET;

master_on();
workers(2);
test_nginx_defaults();

# A second listener with reuseport: each worker has its own socket, so
# connections spread over both workers (the cross-worker block).
$ENV{TEST_NGINX_SPREAD_PORT} = IdempotencyTest::free_port();

our $KEY_A = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
our $KEY_B = 'fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210';

run_tests();

# One request on its own connection; returns {status, headers (lower-case
# names), body}, or dies.
sub http {
    my ($method, $uri, %o) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $o{port} || IdempotencyTest::nginx_port(),
                                     Proto => 'tcp', Timeout => 10)
        or die "cannot connect to nginx: $!\n";
    my $body = $o{body} // 'x';
    my $head = "$method $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: " . length($body) . "\r\n";
    $head .= "Idempotency-Key: $o{key}\r\n" if defined $o{key};
    print {$sock} "$head\r\n$body";
    return read_response($sock);
}

# Reads a response to the end of the connection.
sub read_response {
    my $res = IdempotencyTest::read_response(@_);
    die "no response\n" unless $res->{status};
    return $res;
}

# Waits until the master runs two workers, none of them in @old.
sub await_new_workers {
    my (@old) = @_;
    my %old = map { $_ => 1 } @old;
    IdempotencyTest::wait_until(sub { my @w = IdempotencyTest::worker_pids(); @w == 2 && !grep { $old{$_} } @w }, 10)
        or die "the new workers did not come up\n";
}

sub reload_nginx {
    my @old = IdempotencyTest::worker_pids();
    kill 'HUP', IdempotencyTest::master_pid();
    await_new_workers(@old);
}

# POSTs new keys to $uri until one is answered 503 (the zone has no room for
# a claim); returns how many were answered before.
sub fill_zone {
    my ($uri, $prefix) = @_;
    for my $i (1 .. 300) {
        my $res = http('POST', $uri, key => "$prefix-$i");
        return $i - 1 if $res->{status} == 503;
        die "unexpected $res->{status} while filling the zone\n" unless $res->{status} == 201;
    }
    die "the zone never filled up\n";
}

__DATA__

=== TEST 1: a claim outlives its worker and expires after idempotency_lock_ttl
--- http_config
idempotency_zone zone=idem:10m;
--- config eval
main::idem_location('idempotency_store zone=idem', 'idempotency_lock_ttl 2s')
--- init
$main::original = IdempotencyTest::start_in_flight('/z/12?sleep=1', 'z-12');
my @old = IdempotencyTest::worker_pids();
kill 'KILL', @old;
main::await_new_workers(@old);
--- request
POST /z/12?sleep=1
x
--- more_headers
Idempotency-Key: z-12
--- error_code: 409
--- response_headers
X-Idempotency-Status: conflict
--- error_log
[alert]
exited on signal 9


=== TEST 2: ... once idempotency_lock_ttl has passed, the retry executes
--- init
close $main::original;
IdempotencyTest::wait_until(sub {
    (main::http('POST', '/z/12?sleep=1', key => 'z-12')->{headers}{'x-idempotency-status'} // '') eq 'new'
}, 6) or die "the claim of z-12 never expired\n";
--- request
GET /_count/z/12
--- response_body: 2
--- error_log
[alert]
exited on signal 9


=== TEST 3: a zone with no room for a response keeps the unreplayable marker: 410, never a second execution
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_zone zone=tiny:32k;
--- config eval
main::idem_location('idempotency_store zone=tiny')
. main::location_conf('= /metrics', 'idempotency_metrics')
--- request
POST /z/14?size=60000
x
--- more_headers
Idempotency-Key: z-14
--- error_code: 201
--- response_body_like: \A[a-zA-Z0-9\n]{60000}\z
--- response_headers
X-Idempotency-Status: new
--- error_log eval
qr/\[error\] .*idempotency: zone "tiny" is full: the response to "idem:[0-9a-f]{64}" is not stored, its retries get 410/


=== TEST 4: ... its retry gets 410, the upstream ran once, the metrics count it
--- request eval
["POST /z/14?size=60000\nx", "GET /_count/z/14", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: z-14", "", ""]
--- error_code eval
[410, 200, 200]
--- response_body_like eval
[qr/"status":410[,}]/, qr/\A1\z/, qr/^idempotency_zone_full_total\{operation="store"\} 1$/m]
--- response_headers_like eval
["Content-Type: application/problem\\+json\nX-Idempotency-Status: unreplayable", "", ""]


=== TEST 5: a zone with no room for a claim: 503, or forwarded under idempotency_fail_open; live records stay
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_zone zone=tiny:32k;
--- config eval
main::location_conf('/fill/', 'idempotency on', 'idempotency_store zone=tiny',
                    'idempotency_ttl 1h',
                    'add_header X-Idempotency-Status $idempotency_status always',
                    'proxy_pass http://backend')
. main::location_conf('/open/', 'idempotency on', 'idempotency_store zone=tiny',
                      'idempotency_fail_open on',
                      'add_header X-Idempotency-Status $idempotency_status always',
                      'proxy_pass http://backend')
. main::location_conf('= /metrics', 'idempotency_metrics')
--- init
main::fill_zone('/fill/z15?size=3000', 'z-15');
--- request
POST /fill/z15?size=3000
x
--- more_headers
Idempotency-Key: z-15-new
--- error_code: 503
--- response_headers_like
Content-Type: application/problem\+json
Retry-After: [1-9][0-9]*
X-Idempotency-Status: unavailable
--- error_log eval
qr/\[error\] .*idempotency: zone "tiny" is full: claims refused, requests follow idempotency_fail_open/


=== TEST 6: ... with idempotency_fail_open on the request is forwarded unprotected, and logged
--- request
POST /open/z15
x
--- more_headers
Idempotency-Key: z-15-open
--- error_code: 201
--- response_headers
X-Idempotency-Status: unavailable
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: store unavailable, forwarding requests unprotected/


=== TEST 7: ... forwarded again on a retry; the stored responses are still replayed; the metrics count it
--- request eval
["POST /open/z15\nx", "POST /fill/z15?size=3000\nx", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: z-15-open", "Idempotency-Key: z-15-1", ""]
--- error_code eval
[201, 201, 200]
--- response_headers_like eval
["X-Idempotency-Status: unavailable\nX-Upstream-Execution: 2",
 "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1",
 ""]
--- response_body_like eval
[qr//, qr/\A[a-zA-Z0-9\n]{3000}\z/,
 qr/^idempotency_zone_full_total\{operation="claim"\} [1-9][0-9]*$/m]


=== TEST 8: records survive nginx -s reload
--- http_config
idempotency_zone zone=idem:10m;
--- config eval
main::idem_location('idempotency_store zone=idem')
--- request
POST /z/16
x
--- more_headers
Idempotency-Key: z-16
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1


=== TEST 9: ... the retry after the reload is replayed by the new workers
--- init
main::reload_nginx();
--- request eval
["POST /z/16\nx", "GET /_count/z/16"]
--- more_headers eval
["Idempotency-Key: z-16", ""]
--- error_code eval
[201, 200]
--- response_headers eval
["X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1", ""]
--- response_body_like eval
[qr/"execution":1,/, qr/\A1\z/]
--- no_error_log
[emerg]
[alert]


=== TEST 10: both workers see one zone: duplicates spread over them all get 409, one execution
--- http_config
idempotency_zone zone=idem:10m;
server {
    listen 127.0.0.1:$TEST_NGINX_SPREAD_PORT reuseport;
    location / {
        idempotency on;
        idempotency_store zone=idem;
        add_header X-Idempotency-Status $idempotency_status always;
        add_header X-Worker $pid always;
        proxy_pass http://backend;
    }
}
--- config eval
main::location_conf('/_count/', 'proxy_pass http://backend')
--- init
my $port = $ENV{TEST_NGINX_SPREAD_PORT};
my $before = IdempotencyTest::upstream_count('/z/18');
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 10)
    or die "cannot connect: $!\n";
print {$sock} "POST /z/18?sleep=2 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: z-18\r\n"
              . "Content-Length: 1\r\n\r\nx";
IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count('/z/18') > $before }, 10)
    or die "the original never reached the upstream\n";
my (%workers, %answers);
for (1 .. 24) {
    my $res = main::http('POST', '/z/18?sleep=2', key => 'z-18', port => $port);
    $workers{ $res->{headers}{'x-worker'} // '?' }++;
    $answers{ $res->{status} }++;
}
Test::More::is_deeply(\%answers, { 409 => 24 }, "$0 - 24 duplicates on both workers: all 409");
Test::More::cmp_ok(scalar(keys %workers), '==', 2, "$0 - the duplicates were answered by both workers");
my $original = main::read_response($sock);
Test::More::is($original->{status}, 201, "$0 - the original completed");
my $replay = main::http('POST', '/z/18?sleep=2', key => 'z-18', port => $port);
Test::More::is($replay->{headers}{'idempotent-replayed'}, 'true', "$0 - the retry after it is a replay");
--- request
GET /_count/z/18
--- response_body: 1


=== TEST 11: encryption at rest: records in the zone are sealed and replayed ...
--- user_files eval
">>> zone.key\n$main::KEY_A\n"
--- http_config
idempotency_zone zone=idem:10m;
--- config eval
main::idem_location('idempotency_store zone=idem', 'idempotency_encrypt_key ../html/zone.key')
--- request eval
["POST /z/19\nx", "POST /z/19\nx"]
--- more_headers
Idempotency-Key: z-19
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: replayed\nIdempotent-Replayed: true\nX-Upstream-Execution: 1"]


=== TEST 12: ... and a record sealed under a key no longer configured is refused: 410, not executed again
--- init
open my $fh, '>', "$Test::Nginx::Util::HtmlDir/zone.key" or die "zone.key: $!\n";
print {$fh} "$main::KEY_B\n";
close $fh;
main::reload_nginx();
--- request
POST /z/19
x
--- more_headers
Idempotency-Key: z-19
--- error_code: 410
--- response_body_like: "type":"urn:nginx-idempotency:problem:response-unverifiable"
--- error_log eval
qr/\[error\] .*idempotency: the record under "idem:[0-9a-f]{64}" does not open: sealed with a key that is not configured/


=== TEST 13: ... and the upstream ran once
--- request
GET /_count/z/19
--- response_body: 1


=== TEST 14: a response kept in pieces that finds no room for a piece: counted and logged as zone full, the store's
--- http_config
idempotency_compress off;
idempotency_zone zone=pieces:256k;
--- config eval
main::idem_location('idempotency_store zone=pieces', 'idempotency_max_response_size 8m', 'idempotency_piece_size 64k')
. main::location_conf('= /metrics', 'idempotency_metrics')
--- request
POST /z/20?size=1000000
x
--- more_headers
Idempotency-Key: z-20
--- error_code: 201
--- response_body_like: \A[a-zA-Z0-9\n]+\z
--- response_headers
Content-Length: 1000000
--- error_log eval
qr/\[error\] .*idempotency: zone "pieces" is full: a piece of a response \("\{idem:[0-9a-f]{64}\}:p[0-9a-f]{32}:[0-9a-f]{8}"\) is not stored, the response's retries get 410/


=== TEST 15: ... its retry gets 410, the upstream ran once, the metrics count it as a store
--- request eval
["POST /z/20?size=1000000\nx", "GET /_count/z/20", "GET /metrics"]
--- more_headers eval
["Idempotency-Key: z-20", "", ""]
--- error_code eval
[410, 200, 200]
--- response_body_like eval
[qr/"status":410[,}]/, qr/\A1\z/, qr/^idempotency_zone_full_total\{operation="store"\} [1-9]\d*$/m]


=== TEST 16: pieces leave a zone a minute after their record, not an hour: a zone full of one response's pieces takes another within that
--- http_config
idempotency_compress off;
idempotency_zone zone=ret:1m;
--- config eval
main::idem_location('idempotency_store zone=ret', 'idempotency_ttl 1s', 'idempotency_max_response_size 8m',
                    'idempotency_piece_size 64k')
--- init
# 700 KB in 11 pieces fill most of the 1 MB zone: the next one does not fit
# until they go, a minute after their record (1 s): at most about 62 s
my $first = main::http('POST', '/zr/21?size=700000', key => 'zr-21');
die "the first response was not answered whole\n" unless $first->{status} == 201 && length $first->{body} == 700000;
my ($start, $kept, $tries) = (time, 0, 0);
until ($kept || time - $start > 90) {
    $tries++;
    my $key = "zr-21-next-$tries";
    my $res = main::http('POST', '/zr/21?size=700000', key => $key);
    die "$key: $res->{status}\n" unless $res->{status} == 201;
    # replayed: its record was kept (an immediate retry, within the 1 s ttl)
    $kept = (main::http('POST', '/zr/21?size=700000', key => $key)->{headers}{'x-idempotency-status'} // '') eq 'replayed';
    Time::HiRes::sleep(2) unless $kept;   # the pace of the attempts; each is a whole 700 KB exchange
}
my $waited = time - $start;
Test::More::ok($kept, "another 700 KB response was kept $waited s after the first ($tries tries)");
Test::More::cmp_ok($waited, '<', 90, '... within its pieces\' minute, not an hour');
--- request
GET /_count/zr/21
--- response_body_like: ^\d+$


=== TEST 17: the metrics page shows each zone's size and the bytes of its free pages
--- http_config
idempotency_compress off;
idempotency_zone zone=gauge:1m;
--- config eval
main::idem_location('idempotency_store zone=gauge')
. main::location_conf('= /metrics', 'idempotency_metrics')
--- init
my $before = main::http('GET', '/metrics')->{body};
my ($free) = $before =~ /^idempotency_zone_bytes\{zone="gauge",state="free"\} (\d+)$/m or die "no free bytes on the page\n";
main::http('POST', "/zr/22?size=200000", key => 'zr-22')->{status} == 201 or die "the response was not stored\n";
my ($now) = main::http('GET', '/metrics')->{body} =~ /^idempotency_zone_bytes\{zone="gauge",state="free"\} (\d+)$/m;
Test::More::cmp_ok($now, '<=', $free - 200000, "a 200 KB record takes its pages ($free -> $now free bytes)");
--- request
GET /metrics
--- response_body_like eval
qr/^# TYPE idempotency_zone_bytes gauge\nidempotency_zone_bytes\{zone="gauge",state="size"\} 1048576$/m
--- no_error_log
[error]
