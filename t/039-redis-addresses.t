# A Redis name that resolves to several addresses: the module
# connects to the first that answers, in the resolver's order, and goes back
# to one that was dead when the one in use goes away — for idempotency_redis
# (plain and TLS), the cluster's seed nodes and the sentinels. A refused
# connect is logged as one. This is what a standard Debian /etc/hosts does
# to `localhost` (::1 first, then 127.0.0.1) when Redis listens on
# 127.0.0.1 only.
#
# The names are given to nginx by nss_wrapper (Debian's libnss-wrapper,
# preloaded; NSS_WRAPPER_HOSTS names a hosts file of this test's own), so
# the machine's /etc/hosts is neither read nor changed:
#   v6-first.test    ::1, then 127.0.0.1
#   dead-first.test  127.0.0.2, then 127.0.0.1
# Every Redis here listens on 127.0.0.1 or 127.0.0.2 only.
use FindBin;
use lib "$FindBin::Bin/lib";

my $hosts;
BEGIN {
    my ($wrapper) = grep { -e } map { glob "$_/libnss_wrapper.so" } '/usr/lib/*-linux-gnu', '/usr/lib64', '/usr/lib';
    die "t/039: libnss_wrapper.so not found: install Debian's libnss-wrapper (scripts/install-deps.sh does)\n"
        unless $wrapper;
    require File::Temp;
    $hosts = File::Temp->new(TEMPLATE => 'idempotency-hosts-XXXXXX', TMPDIR => 1);
    print {$hosts} "::1 v6-first.test\n127.0.0.1 v6-first.test\n"
        . "127.0.0.2 dead-first.test\n127.0.0.1 dead-first.test\n";
    close $hosts;
    $ENV{NSS_WRAPPER_HOSTS} = $hosts->filename;
    $ENV{LD_PRELOAD} = join ' ', grep { defined && length } $ENV{LD_PRELOAD}, $wrapper;
}

use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

our $tls = tls_files();
our (undef, $tls_port) = start_redis_tls();
our $later_port = IdempotencyTest::free_port();
IdempotencyTest::start_node($later_port, '--bind', '127.0.0.1', '--port', $later_port, '--save', '',
                            '--appendonly', 'no');
start_redis_cluster(3);
start_redis_sentinel();
@ENV{qw(TEST_NGINX_TLS_PORT TEST_NGINX_DEAD_PORT TEST_NGINX_LATER_PORT)}
    = ($tls_port, IdempotencyTest::free_port(), $later_port);

test_nginx_defaults();
# Every block proxies through one protected location.
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('config', <<'CONFIG') unless defined $block->config;
location / {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
CONFIG
});
run_tests();

__DATA__

=== TEST 1: ::1 refuses, 127.0.0.1 answers: the key is claimed there, the refusal logged as a refused connect
--- http_config
idempotency_redis v6-first.test:$TEST_NGINX_REDIS_PORT;
--- request
POST /addr/1
x
--- more_headers
Idempotency-Key: addr-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis v6-first\.test:\d+: trying 127\.0\.0\.1:\d+ next; \[::1\]:\d+: connect\(\) failed \(111: Connection refused\)/
--- no_error_log eval
[qr/\[error\] .*idempotency/, qr/TLS/]


=== TEST 2: ... its retry is replayed from there
--- http_config
idempotency_redis v6-first.test:$TEST_NGINX_REDIS_PORT;
--- request
POST /addr/1
x
--- more_headers
Idempotency-Key: addr-1
--- error_code: 201
--- response_headers
X-Idempotency-Status: replayed
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- no_error_log eval
[qr/\[error\] .*idempotency/, qr/TLS/]


=== TEST 3: the same over TLS: the certificate checked against the configured name, the refusal not taken for a TLS one
--- http_config
idempotency_redis v6-first.test:$TEST_NGINX_TLS_PORT ssl;
idempotency_redis_ssl_trusted_certificate $TEST_NGINX_TLS_DIR/ca.pem;
idempotency_redis_ssl_name localhost;
--- request
POST /addr/2
x
--- more_headers
Idempotency-Key: addr-2
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis v6-first\.test:\d+: trying 127\.0\.0\.1:\d+ next; \[::1\]:\d+: connect\(\) failed \(111: Connection refused\)/
--- no_error_log eval
[qr/\[error\] .*idempotency/, qr/TLS failed/, qr/closed the connection/]


=== TEST 4: no address answers: 503, each refusal logged as what it was, the last one as the error
--- http_config
idempotency_redis dead-first.test:$TEST_NGINX_DEAD_PORT;
--- request
POST /addr/3
x
--- more_headers
Idempotency-Key: addr-3
--- error_code: 503
--- response_headers
X-Idempotency-Status: unavailable
X-Upstream-Execution:
--- error_log eval
[qr/\[warn\] .*idempotency: Redis dead-first\.test:\d+: trying 127\.0\.0\.1:\d+ next; 127\.0\.0\.2:\d+: connect\(\) failed \(111: Connection refused\)/,
 qr/\[error\] .*idempotency: Redis dead-first\.test:\d+ at 127\.0\.0\.1:\d+: connect\(\) failed \(111: Connection refused\)/]


=== TEST 5: the address that was dead is tried again once the one in use goes away
--- http_config
idempotency_redis dead-first.test:$TEST_NGINX_LATER_PORT;
--- init
my $port = $ENV{TEST_NGINX_LATER_PORT};
# 127.0.0.2 refuses, the Redis on 127.0.0.1 takes the key
IdempotencyTest::nginx_post('/addr/4/first', 'addr-4a') == 201 or die "the first request did not get 201\n";
defined IdempotencyTest::redis_command_at("127.0.0.1:$port", 'GET', IdempotencyTest::redis_key('addr-4a'))
    or die "nothing stored on 127.0.0.1\n";
# that Redis goes; one comes up on the address that refused
IdempotencyTest::cluster_node_stop($port);
IdempotencyTest::start_node($port, '--bind', '127.0.0.2', '--port', $port, '--save', '', '--appendonly', 'no');
# the module reconnects by itself (bounded poll through nginx)
my $n = 0;
IdempotencyTest::wait_until(sub { IdempotencyTest::nginx_post('/addr/4/probe', 'addr-4-probe-' . ++$n) == 201 }, 10)
    or die "no request got through to the Redis on 127.0.0.2\n";
defined IdempotencyTest::redis_command_at("127.0.0.2:$port", 'GET', IdempotencyTest::redis_key("addr-4-probe-$n"))
    or die "nothing stored on 127.0.0.2\n";
--- request
POST /addr/4
x
--- more_headers
Idempotency-Key: addr-4b
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis dead-first\.test:\d+: trying 127\.0\.0\.2:\d+ next; 127\.0\.0\.1:\d+: connect\(\) failed \(111: Connection refused\)/


=== TEST 6: a cluster seed named by a name whose first address refuses
--- http_config
idempotency_redis_cluster v6-first.test:$TEST_NGINX_CLUSTER_PORT_1;
--- request
POST /addr/5
x
--- more_headers
Idempotency-Key: addr-5
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis v6-first\.test:\d+: trying 127\.0\.0\.1:\d+ next; \[::1\]:\d+: connect\(\) failed \(111: Connection refused\)/
--- no_error_log eval
qr/\[error\] .*idempotency/


=== TEST 7: a sentinel named by a name whose first address refuses
--- http_config
idempotency_redis_sentinel mymaster v6-first.test:$TEST_NGINX_SENTINEL_PORT;
--- request
POST /addr/6
x
--- more_headers
Idempotency-Key: addr-6
--- error_code: 201
--- response_headers
X-Idempotency-Status: new
X-Upstream-Execution: 1
--- error_log eval
qr/\[warn\] .*idempotency: Redis v6-first\.test:\d+: trying 127\.0\.0\.1:\d+ next; \[::1\]:\d+: connect\(\) failed \(111: Connection refused\)/
--- no_error_log eval
qr/\[error\] .*idempotency/
