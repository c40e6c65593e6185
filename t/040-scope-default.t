# The key space is safe by default: keys of different virtual servers never
# meet; a location with `idempotency on` and no idempotency_scope anywhere is
# warned about when nginx loads the configuration (callers of the server
# share its space), `idempotency_scope ""` says "one shared space" on
# purpose; server blocks without server_name share a space, and nginx -t
# says so when two of them protect requests; a replay carries Set-Cookie as
# the original had it, the scope keeping it to its caller.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_SECOND_PORT} = IdempotencyTest::free_port();
$ENV{TEST_NGINX_THIRD_PORT} = IdempotencyTest::free_port();

# POSTs "x" with the key to nginx's second listener; returns the status.
sub post_at_second {
    my ($uri, $key) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ENV{TEST_NGINX_SECOND_PORT},
                                     Proto => 'tcp', Timeout => 10) or die "cannot connect: $!\n";
    print {$sock} "POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Idempotency-Key: $key\r\nContent-Length: 1\r\n\r\nx";
    return IdempotencyTest::read_response($sock)->{status};
}

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: two virtual servers on one store: the same key, method, URI and body executes once in each
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    # beside Test::Nginx's own server, on its listener (the same socket)
    listen $TEST_NGINX_SERVER_PORT;
    server_name other.test;
    location / {
        idempotency on;
        idempotency_scope "";
        proxy_pass http://backend;
    }
}
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_scope ""', 'proxy_pass http://backend')
--- request eval
["POST /scope/1\nx", "POST /scope/1\nx", "POST /scope/1\nx", "POST /scope/1\nx"]
--- more_headers eval
["Idempotency-Key: space-1", "Idempotency-Key: space-1\nHost: other.test", "Idempotency-Key: space-1",
 "Idempotency-Key: space-1\nHost: other.test"]
--- error_code eval
[201, 201, 201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1", "!Idempotent-Replayed\nX-Upstream-Execution: 2",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1", "Idempotent-Replayed: true\nX-Upstream-Execution: 2"]


=== TEST 2: server blocks with the same first server_name share one space (a site's two listeners)
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
server {
    listen 127.0.0.1:$TEST_NGINX_SECOND_PORT;
    server_name localhost;
    location / {
        idempotency on;
        idempotency_scope "";
        proxy_pass http://backend;
    }
}
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_scope ""', 'proxy_pass http://backend')
--- init
my $status = main::post_at_second('/scope/2', 'space-2');
Test::More::is($status, 201, 'TEST 2: the first request, on the second listener');
--- request
POST /scope/2
x
--- more_headers
Idempotency-Key: space-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1


=== TEST 3: no idempotency_scope anywhere: nginx warns, naming the location and what to set
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/v1/', 'idempotency on', 'proxy_pass http://backend')
--- request
POST /v1/scope/3
x
--- more_headers
Idempotency-Key: space-3
--- error_code: 201
--- error_log eval
qr/\[warn\] .*"idempotency on" in location "\/v1\/" without "idempotency_scope": every caller of this server shares one key space.*\$remote_user.*auth_request_set.*or to "" to share the space on purpose/


=== TEST 4: idempotency_scope "" in an enclosing block, or a caller scope, silences the warning
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location /v1/ {
    idempotency on;
    idempotency_scope $http_x_tenant;
    proxy_pass http://backend;
}
location /v2/ {
    idempotency on;
    idempotency_scope "";
    location /v2/nested/ {
        proxy_pass http://backend;
    }
    proxy_pass http://backend;
}
location /v3/ {
    proxy_pass http://backend;
}
--- request
POST /v2/nested/scope/4
x
--- more_headers
Idempotency-Key: space-4
--- error_code: 201
--- no_error_log
without "idempotency_scope"


=== TEST 5: Set-Cookie is replayed in order: the scope keeps it to its caller, another caller executes anew
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::location_conf('/caller/', 'idempotency on', 'idempotency_scope $http_x_caller',
                    'proxy_pass http://backend')
--- request eval
["POST /caller/5?cookies=2\nx", "POST /caller/5?cookies=2\nx", "POST /caller/5?cookies=2\nx"]
--- more_headers eval
["Idempotency-Key: space-5\nX-Caller: alice", "Idempotency-Key: space-5\nX-Caller: alice",
 "Idempotency-Key: space-5\nX-Caller: mallory"]
--- error_code eval
[201, 201, 201]
--- raw_response_headers_like eval
[qr/\r\nSet-Cookie: c1=v1\r\nSet-Cookie: c2=v2\r\n(?!.*Idempotent-Replayed)/s,
 qr/\r\nSet-Cookie: c1=v1\r\nSet-Cookie: c2=v2\r\n.*Idempotent-Replayed: true\r\n/s,
 qr/\r\nSet-Cookie: c1=v1\r\nSet-Cookie: c2=v2\r\n(?!.*Idempotent-Replayed)/s]
--- response_headers eval
["X-Upstream-Execution: 1", "X-Upstream-Execution: 1", "X-Upstream-Execution: 2"]


=== TEST 6: two protecting server blocks without server_name share one key space: nginx warns
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_scope "";
server {
    listen 127.0.0.1:$TEST_NGINX_SECOND_PORT;
    location / {
        idempotency on;
        proxy_pass http://backend;
    }
}
server {
    listen 127.0.0.1:$TEST_NGINX_THIRD_PORT;
    location / {
        idempotency on;
        proxy_pass http://backend;
    }
}
--- config eval
main::location_conf('/probe', 'return 204')
--- request
GET /probe
--- error_code: 204
--- error_log eval
qr/\[warn\] .*"idempotency on" in server blocks without "server_name": their keys share one key space; give each server block a "server_name"/
