# The shared-memory store's directives: idempotency_zone defines a
# zone at http level, idempotency_store selects it (or Redis); nginx -t
# refuses every misuse with a message naming the directive and the zone.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';

test_nginx_defaults();
run_tests();

__DATA__

=== TEST 1: a zone and no Redis at all: the location is protected by the zone
--- http_config
idempotency_zone zone=payments:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=payments;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
--- request eval
["POST /zc/1\nx", "POST /zc/1\nx"]
--- more_headers
Idempotency-Key: zc-1
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new\nX-Upstream-Execution: 1", "X-Idempotency-Status: replayed\nX-Upstream-Execution: 1"]
--- no_error_log
[emerg]
[error]


=== TEST 2: the zone may be defined after the locations that select it; idempotency_store redis selects Redis
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_store zone=later;
idempotency_zone zone=later:1m;
--- config
location /zone/ {
    idempotency on;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /redis/ {
    idempotency on;
    idempotency_store redis;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
IdempotencyTest::redis_command('DEL', IdempotencyTest::redis_key('zc-2'));
--- request eval
["POST /zone/zc2\nx", "POST /redis/zc2\nx"]
--- more_headers
Idempotency-Key: zc-2
--- error_code eval
[201, 201]
--- response_headers eval
["X-Idempotency-Status: new", "X-Idempotency-Status: new"]


=== TEST 3: ... only the Redis location's record is in Redis
--- init
my $kind = IdempotencyTest::stored_kind(IdempotencyTest::redis_key('zc-2'));
die "Redis holds " . ($kind // 'nothing') . " for zc-2\n" unless ($kind // '') eq 'response';
--- request eval
["POST /zone/zc2\nx", "GET /_count/zone/zc2", "GET /_count/redis/zc2"]
--- more_headers eval
["Idempotency-Key: zc-2", "", ""]
--- error_code eval
[201, 200, 200]
--- response_headers eval
["X-Idempotency-Status: replayed", "", ""]
--- response_body_like eval
[qr//, qr/\A1\z/, qr/\A1\z/]


=== TEST 4: idempotency_store names a zone nobody defined
--- config
location / {
    idempotency on;
    idempotency_store zone=nowhere;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_store": unknown zone "nowhere" \(define it with "idempotency_zone zone=nowhere:SIZE"/


=== TEST 5: a zone smaller than 8 pages
--- http_config
idempotency_zone zone=small:16k;
--- config
location / {
    idempotency on;
    idempotency_store zone=small;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*zone "small" of "idempotency_zone" is too small: at least 32k/


=== TEST 6: the same zone defined twice
--- http_config
idempotency_zone zone=twice:1m;
idempotency_zone zone=twice:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=twice;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*duplicate zone "twice" in "idempotency_zone"/


=== TEST 7: idempotency_zone without zone=NAME:SIZE
--- http_config
idempotency_zone payments:1m;
--- config
location / {
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid parameter "payments:1m" in "idempotency_zone" \(expected zone=NAME:SIZE\)/


=== TEST 8: idempotency_zone without a size
--- http_config
idempotency_zone zone=payments;
--- config
location / {
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid parameter "zone=payments" in "idempotency_zone"/


=== TEST 9: idempotency_zone with a bad size
--- http_config
idempotency_zone zone=payments:10q;
--- config
location / {
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid size "10q" of zone "payments" in "idempotency_zone"/


=== TEST 10: idempotency_zone is for the http block only
--- config
location / {
    idempotency_zone zone=inner:1m;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_zone" directive is not allowed here/


=== TEST 11: idempotency_store with something else than zone=NAME or redis
--- config
location / {
    idempotency on;
    idempotency_store memcached;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid value "memcached" in "idempotency_store" \(expected zone=NAME or redis\)/


=== TEST 12: idempotency_store twice in one block
--- http_config
idempotency_zone zone=payments:1m;
--- config
location / {
    idempotency on;
    idempotency_store zone=payments;
    idempotency_store redis;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency_store" directive is duplicate/


=== TEST 13: idempotency on with idempotency_store redis but no Redis: neither store in reach
--- http_config
idempotency_zone zone=payments:1m;
--- config
location / {
    idempotency on;
    idempotency_store redis;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*"idempotency on" needs a store: .*"idempotency_store zone=NAME" with "idempotency_zone"/


=== TEST 14: a zone name another module uses is refused, not shared
--- http_config
limit_req_zone $binary_remote_addr zone=shared:1m rate=10r/s;
idempotency_zone zone=shared:1m;
--- config
location / {
    limit_req zone=shared;
    idempotency on;
    idempotency_store zone=shared;
    proxy_pass http://backend;
}
--- must_die
--- error_log eval
qr/\[emerg\] .*the shared memory zone "shared" is already declared for a different use/
