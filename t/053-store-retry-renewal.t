# A store that meets a lost connection is sent again, and before each
# attempt it renews the claim for another idempotency_lock_ttl
# (docs/design.md#transient-errors-and-reloads): retries meanwhile get 409,
# never a second execution, however long the store takes past lock_ttl.
# Here Redis takes the claim and its renewals but closes the connection on
# every store: a 2 MB store is more than its client-query-buffer-limit
# (1 MB) lets one command carry. Once the limit is raised, the store goes
# through and the retry gets the replay; the upstream ran once. The
# upstream takes 1.2 s, so the claim (3 s) is renewed once while it works,
# on a connection that stays up: Redis knows the renewal's script before
# the store's connections start to drop. TEST 2 starts with Redis's script
# cache empty and no renewal before the store: the renewal ahead of each
# attempt must not depend on a script Redis would have to load on a
# connection that drops with the store.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Test::Nginx::Socket 'no_plan';
use Time::HiRes ();

test_nginx_defaults();
run_tests();

sub kind_of {
    my $kind = eval { stored_kind(redis_key($_[0])) };
    return $@ ? 'unknown' : $kind // 'nothing';
}

sub lost_connection_past_lock_ttl {
    my ($uri, $key, $flush) = @_;
    (my $path = $uri) =~ s/\?.*//;
    redis_command('SCRIPT', 'FLUSH') if $flush;
    redis_command('CONFIG', 'SET', 'client-query-buffer-limit', 1024 * 1024);
    Test::More::is(nginx_post($uri, $key), 201, "$key: the original is answered in full");
    Test::More::ok(IdempotencyTest::error_log_has('cannot store the response for', 5),
                   "$key: its store meets a lost connection and is tried again");
    # A retry whose own claim met a lost connection gets 503; sent again
    # until it meets the claim (for at most 5 s).
    my @seen;
    wait_until(sub { push @seen, nginx_post($uri, $key); $seen[-1] == 409 }, 5);
    Test::More::is($seen[-1], 409, "$key: a retry finds the claim (@seen)");
    # The claim is 3 s long and was last renewed by the request before its
    # response: 4.5 s later, only the store's renewals keep it. A time is
    # the condition here.
    Time::HiRes::sleep(4.5);
    Test::More::is(kind_of($key), 'claim', "$key: the claim lives on past its lock_ttl");
    @seen = ();
    wait_until(sub { push @seen, nginx_post($uri, $key); $seen[-1] != 503 }, 5);
    Test::More::is($seen[-1], 409, "$key: a retry still gets 409 (@seen)");
    Test::More::is(upstream_count($path), 1, "$key: one execution");
    redis_command('CONFIG', 'SET', 'client-query-buffer-limit', 1024 * 1024 * 1024);
    Test::More::ok(wait_until(sub { kind_of($key) eq 'response' }, 10), "$key: stored once Redis takes it");
}

__DATA__

=== TEST 1: a store that loses its connection on every attempt keeps renewing the claim: 409 past idempotency_lock_ttl, then the replay; one execution
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 3s;
    idempotency_max_response_size 4m;
    idempotency_piece_size 4m;  # one record, not pieces: its store is what is tried again
    proxy_pass http://backend;
}
--- init
main::lost_connection_past_lock_ttl('/lost/1?size=2000000&sleep=1.2', 'lost-1');
--- request
POST /lost/1?size=2000000&sleep=1.2
x
--- more_headers
Idempotency-Key: lost-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- response_body_like: \A(?:[a-zA-Z0-9\n]{50000}){40}\z
--- timeout: 20


=== TEST 2: the same with Redis's script cache empty and no renewal before the store: the renewals ahead of each attempt still keep the claim
--- http_config
# the record's size is what this block is about: kept uncompressed
idempotency_compress off;
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 3s;
    idempotency_max_response_size 4m;
    idempotency_piece_size 4m;  # one record, not pieces: its store is what is tried again
    proxy_pass http://backend;
}
--- init
main::lost_connection_past_lock_ttl('/lost/2?size=2000000', 'lost-2', 1);
--- request
POST /lost/2?size=2000000
x
--- more_headers
Idempotency-Key: lost-2
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Upstream-Execution: 1
--- response_body_like: \A(?:[a-zA-Z0-9\n]{50000}){40}\z
--- timeout: 20
