# A full Redis never executes a request twice, and once it takes writes
# again every key gets its answer
# (docs/design.md#transient-errors-and-reloads, docs/design.md#store-protocols).
# With maxmemory and maxmemory-policy noeviction, the test's own keys fill
# Redis while requests are in flight; their stores are refused (OOM).
# Extending a key's TTL needs no memory, so each claim is kept for
# idempotency_ttl: retries get 503 while Redis is full (it refuses their
# claims too) or 409. The stores are kept, not given up, for that whole
# life: once the filler is deleted, a retry gets the replay within a few
# seconds — however long Redis was full — or 410 for a response beyond
# the worker's idempotency_redis_oom_buffer, whose marker is stored in its
# place. The upstream runs once per key. The refusal is logged (error) and
# counted.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(location_conf);
use Test::Nginx::Socket 'no_plan';
use Time::HiRes qw(time);

test_nginx_defaults();
run_tests();

sub metric {
    my ($name) = @_;
    my $sock = IdempotencyTest::send_request("GET /metrics HTTP/1.0\r\n\r\n");
    my $page = do { local $/; <$sock> } // '';
    return $page =~ /^\Q$name\E (\d+)$/m ? $1 : 'absent';
}

# Fills Redis with keys of 10 kB (at most 2000, for at most 10 s) until it
# answers OOM; returns how many it took.
sub flood {
    my $value = 'f' x 10_000;
    my $deadline = time + 10;
    for my $i (1 .. 2000) {
        last if time > $deadline;
        my $ok = eval { IdempotencyTest::redis_command('SET', "flood:$i", $value); 1 };
        return $i if !$ok && $@ =~ /OOM/;
        die "flood: $@" unless $ok;
    }
    die "Redis never filled up\n";
}

# Sends the original of each key to $uri (its upstream sleeps 2 s), and
# fills Redis once every one of them has reached the upstream, so that
# their stores find it full. Returns the number of filler keys and the
# originals' sockets.
sub fill_while_in_flight {
    my ($uri, @keys) = @_;
    (my $path = $uri) =~ s/\?.*//;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    my ($used) = IdempotencyTest::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', $used + 2_000_000);
    my $before = IdempotencyTest::upstream_count($path);
    my @socks = map {
        IdempotencyTest::send_request("POST $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            . "Idempotency-Key: $_\r\nContent-Length: 1\r\n\r\nx")
    } @keys;
    IdempotencyTest::wait_until(sub { IdempotencyTest::upstream_count($path) >= $before + @keys }, 10)
        or die "the originals never reached the upstream\n";
    my $filler = flood();
    # Full it stays: the test's own connections, whose buffers Redis frees
    # as they close, must not leave room for the stores.
    my ($full) = IdempotencyTest::redis_command('INFO', 'memory') =~ /used_memory:(\d+)/;
    IdempotencyTest::redis_command('CONFIG', 'SET', 'maxmemory', $full - 65_536);
    return ($filler, \@socks);
}

# Room again: the filler goes; maxmemory stays where it was.
sub free_redis {
    my ($filler) = @_;
    IdempotencyTest::redis_command('DEL', "flood:$_") for 1 .. $filler;
}

# Retries each key until it gets something else than 409 (or 503), for at
# most $secs; returns {key => [response, seconds taken]}.
sub retry_until_answered {
    my ($uri, $secs, @keys) = @_;
    my (%answer, $t0);
    $t0 = time;
    IdempotencyTest::wait_until(sub {
        for my $key (grep { !$answer{$_} } @keys) {
            my $res = IdempotencyTest::post_key($uri, $key);
            $answer{$key} = [$res, time - $t0] unless $res->{status} == 409 || $res->{status} == 503;
        }
        keys %answer == @keys;
    }, $secs);
    return \%answer;
}

# Redis's counters (INFO commandstats; not reset: CONFIG RESETSTAT frees
# memory, and would let a full Redis take writes): the scripts sent with
# their body (EVAL: the keeps), and the SETs refused.
sub keeps_and_refused_sets {
    my $stats = IdempotencyTest::redis_command('INFO', 'commandstats');
    my ($keeps) = $stats =~ /^cmdstat_eval:calls=(\d+)/m;
    my ($refused) = $stats =~ /^cmdstat_set:.*\brejected_calls=(\d+)/m;
    return (keeps => $keeps // 0, refused_sets => $refused // 0);
}

# The refusals for memory logged so far.
sub refusals {
    open my $fh, '<', $Test::Nginx::Util::ErrLogFile or return 0;
    return scalar grep { /is out of memory and refused the response for/ } <$fh>;
}

__DATA__

=== TEST 1: Redis full past every retry window (22 s) while ten responses wait to be stored: each claim is kept, and once the filler is deleted every retry gets the replay within seconds; the upstream ran once per key
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 1s;
    idempotency_ttl 1h;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location = /metrics {
    idempotency_metrics;
}
--- init
my @keys = map { "full-1-$_" } 1 .. 10;
my ($filler, $socks) = main::fill_while_in_flight('/full/1?sleep=2', @keys);
Test::More::ok($filler > 1, "a flood of $filler keys filled Redis while the requests were in flight");
Test::More::is(join(' ', map { IdempotencyTest::read_response($_)->{status} } @$socks), join(' ', (201) x 10),
               'the originals are answered');
Test::More::ok(IdempotencyTest::wait_until(sub { main::refusals() >= 10 }, 10), 'each refusal is logged');
my $refused_at = Time::HiRes::time();
my %before = main::keeps_and_refused_sets();
my @pttl = map { IdempotencyTest::redis_command('PTTL', IdempotencyTest::redis_key($_)) } @keys;
Test::More::is(scalar(grep { $_ > 3_000_000 } @pttl), 10, "every claim is kept for idempotency_ttl: @pttl[0, 1] ms left ...");
# Full for longer than a store's retry window (idempotency_lock_ttl, at
# least 20 s); a retry meanwhile is answered 409, or 503 when Redis refuses
# its claim too.
my @seen;
IdempotencyTest::wait_until(sub { push @seen, IdempotencyTest::nginx_post('/full/1?sleep=2', $keys[0]);
                                  Time::HiRes::time() - $refused_at >= 22 }, 40);
Test::More::is(join(' ', grep { $_ != 409 && $_ != 503 } @seen), '', scalar(@seen) . ' retries while full: 409 or 503');
# Each kept attempt is its keep (the script: EVAL, which a full Redis
# takes) and then its store (a SET refused for memory on a server with
# conditional writes): were the keep a conditional SET, refused too and
# sent again as the script behind its store, SET would be refused twice
# per attempt. Each retry's claim is one SET refused.
my %after = main::keeps_and_refused_sets();
my ($keeps, $set_refused) = ($after{keeps} - $before{keeps}, $after{refused_sets} - $before{refused_sets});
Test::More::ok($keeps >= 5, "the claims were kept by $keeps scripts while full");
Test::More::cmp_ok($set_refused - @seen, '<=', $keeps + 1,
                   'no keep went as a SET: the SETs refused are the stores\' and the retries\' claims');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key($keys[-1])), 'claim', 'the claims stay');
main::free_redis($filler);
my $answers = main::retry_until_answered('/full/1?sleep=2', 15, @keys);
my @replayed = grep { $answers->{$_} && $answers->{$_}[0]{status} == 201
                      && ($answers->{$_}[0]{headers}{'idempotent-replayed'} // '') eq 'true' } @keys;
Test::More::is(scalar(@replayed), 10, 'once the filler is deleted, a retry of every key gets the replay');
my ($slowest) = sort { $b <=> $a } map { $answers->{$_} ? $answers->{$_}[1] : 99 } @keys;
Test::More::ok($slowest < 5, sprintf 'the last within %.1f s of the delete (at most 5)', $slowest);
# ten keys on one path, each answered 201 by its own execution: ten in all is once each
Test::More::is(IdempotencyTest::upstream_count('/full/1'), 10, 'the upstream ran once per key');
Test::More::is(main::metric('idempotency_redis_stores_out_of_memory_total'), 10, 'counted');
Test::More::is(main::metric('idempotency_redis_oom_markers_total'), 0, 'every response was held');
--- request
POST /full/1?sleep=2
x
--- more_headers
Idempotency-Key: full-1-1
--- error_code: 201
--- response_headers
Idempotent-Replayed: true
X-Idempotency-Status: replayed
--- error_log
is out of memory and refused the response for
attempt
to store the response for
succeeded
--- no_error_log
gave up trying to store
--- timeout: 10


=== TEST 2: the worker holds at most idempotency_redis_oom_buffer of refused responses: of two of 20 kB with a buffer of 30 kB, one is held and replayed, the other's marker stored in its place (410) once the filler is deleted; one execution each
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_redis_oom_buffer 30k;
# the records' sizes are what this block is about: kept uncompressed
idempotency_compress off;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 1s;
    idempotency_ttl 1h;
    add_header X-Idempotency-Status $idempotency_status always;
    proxy_pass http://backend;
}
location = /metrics {
    idempotency_metrics;
}
--- init
my @keys = ('full-2-a', 'full-2-b');
my ($filler, $socks) = main::fill_while_in_flight('/full/2?sleep=2&size=20000', @keys);
Test::More::is(join(' ', map { IdempotencyTest::read_response($_)->{status} } @$socks), '201 201',
               'the originals are answered in full');
Test::More::ok(IdempotencyTest::wait_until(sub { main::refusals() >= 2 }, 10), 'both refusals are logged');
Test::More::ok(IdempotencyTest::error_log_has('idempotency_redis_oom_buffer holds 20'), 'the one beyond the buffer is let go');
Test::More::is(join(' ', map { IdempotencyTest::stored_kind(IdempotencyTest::redis_key($_)) } @keys), 'claim claim',
               'both claims are kept meanwhile');
main::free_redis($filler);
my $answers = main::retry_until_answered('/full/2?sleep=2&size=20000', 15, @keys);
my @got = sort map { $answers->{$_} ? "$answers->{$_}[0]{status} $answers->{$_}[0]{headers}{'x-idempotency-status'}"
                                    : 'none' } @keys;
Test::More::is("@got", '201 replayed 410 unreplayable', "once the filler is deleted: one replay, one 410 (@got)");
my ($slowest) = sort { $b <=> $a } map { $answers->{$_} ? $answers->{$_}[1] : 99 } @keys;
Test::More::ok($slowest < 5, sprintf 'within %.1f s of the delete (at most 5)', $slowest);
my ($held) = grep { $answers->{$_} && $answers->{$_}[0]{status} == 201 } @keys;
Test::More::is(length($answers->{$held}[0]{body}), 20000, 'the held response replays whole') if $held;
Test::More::is(main::metric('idempotency_redis_oom_markers_total'), 1, 'the marker is counted');
--- request
GET /_count/full/2
--- response_body: 2
--- error_log
the unreplayable marker is stored in its place once Redis takes writes
--- timeout: 10


=== TEST 3: with idempotency_encrypt_key and no buffer, the marker stored in a refused response's place is sealed: a retry gets 410 unreplayable, not an unverifiable record
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
idempotency_redis_oom_buffer 0;
--- config eval
main::location_conf('/', 'idempotency on', 'idempotency_encrypt_key ../html/seal.key', 'idempotency_ttl 1h',
                    'add_header X-Idempotency-Status $idempotency_status always', 'proxy_pass http://backend')
--- user_files
>>> seal.key
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
--- init
my ($filler, $socks) = main::fill_while_in_flight('/full/3?sleep=2', 'full-3');
Test::More::is(IdempotencyTest::read_response($socks->[0])->{status}, 201, 'the original is answered');
Test::More::ok(IdempotencyTest::error_log_has('the unreplayable marker is stored in its place'), 'only the marker is held');
main::free_redis($filler);
Test::More::ok(IdempotencyTest::wait_until(sub { (IdempotencyTest::stored_kind(IdempotencyTest::redis_key('full-3')) // '') ne 'claim' }, 10),
               'the marker lands once the filler is deleted');
--- request
POST /full/3?sleep=2
x
--- more_headers
Idempotency-Key: full-3
--- error_code: 410
--- response_headers
X-Idempotency-Status: unreplayable
--- no_error_log
does not open


=== TEST 4: a kept store lasts its claim's extended life and no longer: each attempt renews the claim only for what is left of idempotency_ttl from the refusal, and when that is over the store gives up (logged) and the claim is gone with it
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
location / {
    idempotency on;
    idempotency_lock_ttl 1s;
    idempotency_ttl 4s;
    proxy_pass http://backend;
}
location /_count/ {
    proxy_pass http://backend;
}
--- init
my ($filler, $socks) = main::fill_while_in_flight('/full/4?sleep=2', 'full-4');
Test::More::is(IdempotencyTest::read_response($socks->[0])->{status}, 201, 'the original is answered');
Test::More::ok(IdempotencyTest::error_log_has('is out of memory and refused the response for'), 'the refusal is logged');
my $refused = Time::HiRes::time();
Test::More::ok(IdempotencyTest::error_log_has('kept for memory', 5), 'the store is tried again');
IdempotencyTest::wait_until(sub { Time::HiRes::time() - $refused >= 2 }, 5);
my $pttl = IdempotencyTest::redis_command('PTTL', IdempotencyTest::redis_key('full-4'));
# renewed for the whole 4 s at each attempt (once a second), it would have more than 3 s
Test::More::ok($pttl > 0 && $pttl < 2_800, "two seconds on, the claim has what is left of its 4 s: $pttl ms");
Test::More::ok(IdempotencyTest::error_log_has('expires now', 5), 'the store gives up when that life is over');
Test::More::is(IdempotencyTest::stored_kind(IdempotencyTest::redis_key('full-4')), undef, 'and the claim is gone');
main::free_redis($filler);
--- request
GET /_count/full/4
--- response_body: 1
--- error_log eval
qr/\[error\] .*gave up trying to store the response for "idem:[0-9a-f]+" on Redis \S+ after \d+ attempts in \d+ ms: OOM/
