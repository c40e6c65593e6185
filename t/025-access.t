# Access checks come first (docs/design.md#access-first): only a
# request that nginx's access phase admitted has its key validated, its body
# fingerprinted, a claim made or a replay served. A refused request gets the
# refusal and leaves nothing in Redis; variables set by access modules
# (auth_request_set, $remote_user) are in force in idempotency_scope.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value('user_files', ">>> htpasswd\nalice:{PLAIN}secret\nbob:{PLAIN}hunter2\n")
        unless defined $block->user_files;
});
run_tests();

__DATA__

=== TEST 1: auth_basic: a replay is not served to a caller without credentials
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    add_header X-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /a/1\namount=100", "POST /a/1\namount=100", "POST /a/1\namount=100"]
--- more_headers eval
["Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-1",
 "Idempotency-Key: access-1",
 "Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-1"]
--- error_code eval
[201, 401, 201]
--- response_headers eval
["X-Upstream-Execution: 1\nX-Status: new",
 "!Idempotent-Replayed\n!X-Upstream-Execution\nX-Status: ",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1\nX-Status: replayed"]
--- no_error_log
[error]


=== TEST 2: auth_basic: a refused request claims nothing, so the authenticated one executes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    proxy_pass http://backend;
}
--- request eval
["POST /a/2\namount=100", "POST /a/2\namount=100"]
--- more_headers eval
["Authorization: Basic YWxpY2U6d3Jvbmc=\nIdempotency-Key: access-2",
 "Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-2"]
--- error_code eval
[401, 201]
--- response_headers eval
["!X-Upstream-Execution", "!Idempotent-Replayed\nX-Upstream-Execution: 1"]


=== TEST 3: deny all: 403, and nothing is written to Redis
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    deny all;
    idempotency on;
    idempotency_required on;
    proxy_pass http://backend;
}
--- request eval
["POST /a/3\nx", "POST /a/3\nx"]
--- more_headers eval
["Idempotency-Key: access-3", ""]
--- error_code eval
[403, 403]
--- response_headers eval
["!Idempotent-Replayed", "!Content-Type: application/problem+json"]


=== TEST 4: ... the denied key was never claimed
--- init
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-3')), undef,
               'TEST 4: nothing under the denied request\'s key');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-2')), 'response',
               'TEST 4: the authenticated request of TEST 2 stored its response');
Test::More::is(IdempotencyTest::upstream_count('/a/3'), 0, 'TEST 4: the denied request never executed');
--- config
location / {
    return 204;
}
--- request
GET /
--- error_code: 204


=== TEST 5: satisfy any: admitted by allow, without credentials, the request is protected
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    satisfy any;
    allow 127.0.0.1;
    deny all;
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    add_header X-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /a/5\nx", "POST /a/5\nx"]
--- more_headers
Idempotency-Key: access-5
--- error_code eval
[201, 201]
--- response_headers eval
["X-Upstream-Execution: 1\nX-Status: new",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1\nX-Status: replayed"]
--- no_error_log
[error]


=== TEST 6: satisfy any: refused by both, 401 and no claim; admitted by auth_basic, protected
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    satisfy any;
    deny all;
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    proxy_pass http://backend;
}
--- request eval
["POST /a/6\nx", "POST /a/6\nx", "POST /a/6\nx"]
--- more_headers eval
["Idempotency-Key: access-6",
 "Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-6",
 "Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-6"]
--- error_code eval
[401, 201, 201]
--- response_headers eval
["!X-Upstream-Execution",
 "!Idempotent-Replayed\nX-Upstream-Execution: 1",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 7: $remote_user scopes the key: bob never gets alice's response
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    idempotency_scope $remote_user;
    proxy_pass http://backend;
}
--- request eval
["POST /a/7\nx", "POST /a/7\nx", "POST /a/7\nx"]
--- more_headers eval
["Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-7",
 "Authorization: Basic Ym9iOmh1bnRlcjI=\nIdempotency-Key: access-7",
 "Authorization: Basic YWxpY2U6c2VjcmV0\nIdempotency-Key: access-7"]
--- error_code eval
[201, 201, 201]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1",
 "!Idempotent-Replayed\nX-Upstream-Execution: 2",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 8: auth_request_set: the tenant the auth service names scopes the key
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
map $http_x_api_key $auth_status {
    ""      401;
    default 200;
}
--- config
location / {
    auth_request /_auth;
    auth_request_set $tenant $upstream_http_x_tenant;
    idempotency on;
    idempotency_scope $tenant;
    add_header X-Scope $tenant always;
    proxy_pass http://backend;
}
location = /_auth {
    internal;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_pass http://backend/_authz?status=$auth_status&header=X-Tenant:tenant-$http_x_api_key;
}
--- request eval
["POST /a/8\nx", "POST /a/8\nx", "POST /a/8\nx", "POST /a/8\nx"]
--- more_headers eval
["X-Api-Key: a\nIdempotency-Key: access-8",
 "X-Api-Key: b\nIdempotency-Key: access-8",
 "X-Api-Key: a\nIdempotency-Key: access-8",
 "Idempotency-Key: access-8"]
--- error_code eval
[201, 201, 201, 401]
--- response_headers eval
["!Idempotent-Replayed\nX-Upstream-Execution: 1\nX-Scope: tenant-a",
 "!Idempotent-Replayed\nX-Upstream-Execution: 2\nX-Scope: tenant-b",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1\nX-Scope: tenant-a",
 "!Idempotent-Replayed\n!X-Upstream-Execution"]
--- no_error_log
[error]


=== TEST 9: ... each tenant's record lives under its own scope, none under the empty one
--- init
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-8', 'tenant-a')), 'response',
               'TEST 9: tenant-a\'s record');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-8', 'tenant-b')), 'response',
               'TEST 9: tenant-b\'s record');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-8', '')), undef,
               'TEST 9: nothing under the empty scope');
--- config
location / {
    return 204;
}
--- request
GET /
--- error_code: 204


=== TEST 10: auth_request's refusal is never stored: the caller who then authenticates executes
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    auth_request /_auth;
    idempotency on;
    proxy_pass http://backend;
}
location = /_auth {
    internal;
    if ($http_x_api_key != "good") {
        return 403;
    }
    return 204;
}
--- request eval
["POST /a/10\nx", "POST /a/10\nx", "POST /a/10\nx"]
--- more_headers eval
["X-Api-Key: bad\nIdempotency-Key: access-10",
 "X-Api-Key: good\nIdempotency-Key: access-10",
 "X-Api-Key: good\nIdempotency-Key: access-10"]
--- error_code eval
[403, 201, 201]
--- response_headers eval
["!X-Upstream-Execution",
 "!Idempotent-Replayed\nX-Upstream-Execution: 1",
 "Idempotent-Replayed: true\nX-Upstream-Execution: 1"]
--- no_error_log
[error]


=== TEST 11: an invalid key from a refused caller is the refusal, not a 400
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    auth_basic "payments";
    auth_basic_user_file ../html/htpasswd;
    idempotency on;
    idempotency_required on;
    proxy_pass http://backend;
}
--- request eval
["POST /a/11\nx", "POST /a/11\nx"]
--- more_headers eval
["Idempotency-Key: two words", ""]
--- error_code eval
[401, 401]
--- response_headers eval
["!Content-Type: application/problem+json", "!Content-Type: application/problem+json"]


=== TEST 12: a location answered by `return` is nginx's own answer, before the access checks: left alone
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location = /stamp {
    deny all;
    idempotency on;
    add_header X-Status "[$idempotency_status]" always;
    return 200 "request $request_id\n";
}
--- request eval
["POST /stamp\nx", "POST /stamp\nx"]
--- more_headers
Idempotency-Key: access-12
--- error_code eval
[200, 200]
--- response_headers eval
["X-Status: []\n!Idempotent-Replayed", "X-Status: []\n!Idempotent-Replayed"]


=== TEST 13: ... and nothing was claimed for it
--- init
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('access-12')), undef,
               'TEST 13: nothing under the key sent to a `return` location');
--- config
location / {
    return 204;
}
--- request
GET /
--- error_code: 204
