# A reload that fails (a bad configuration) leaves the running configuration
# in place; a worker that nginx respawns after it attaches to that
# configuration's shared memory: /metrics keeps answering and counting.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(metered_location);
use Test::Nginx::Socket 'no_plan';

master_on();
workers(1);
test_nginx_defaults();
run_tests();

sub error_log_has {
    my ($re) = @_;
    open my $fh, '<', $Test::Nginx::Util::ErrLogFile or return 0;
    local $/;
    my $log = <$fh> // '';
    return $log =~ $re;
}

# Reloads with a configuration nginx refuses, then puts the good one back;
# the running workers are left as they were.
sub failed_reload {
    my $conf = $Test::Nginx::Util::ConfFile;
    open my $in, '<', $conf or die "cannot read $conf: $!\n";
    my $good = do { local $/; <$in> };
    close $in;
    open my $out, '>', $conf or die "cannot write $conf: $!\n";
    print {$out} $good, "\nno_such_directive_here on;\n";
    close $out;
    kill 'HUP', IdempotencyTest::master_pid();
    my $refused = IdempotencyTest::wait_until(sub { error_log_has(qr/unknown directive "no_such_directive_here"/) }, 10);
    open $out, '>', $conf or die "cannot write $conf: $!\n";
    print {$out} $good;
    close $out;
    die "the bad configuration was not refused\n" unless $refused;
}

# Kills the worker and waits for the one the master starts in its place.
sub respawn_worker {
    my @old = IdempotencyTest::worker_pids();
    die "no worker\n" unless @old == 1;
    kill 'KILL', $old[0];
    IdempotencyTest::wait_until(sub { my @w = IdempotencyTest::worker_pids(); @w == 1 && $w[0] != $old[0] }, 10)
        or die "no worker was respawned\n";
}

__DATA__

=== TEST 1: after a failed reload and a respawned worker, /metrics answers and keeps counting
--- http_config
idempotency_redis 127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config eval
main::metered_location()
--- init
IdempotencyTest::nginx_post('/reload/1', 'reload-1') == 201 or die "the first POST failed\n";
main::failed_reload();
main::respawn_worker();
IdempotencyTest::nginx_post('/reload/2', 'reload-2') == 201 or die "the POST after the respawn failed\n";
--- request
GET /metrics
--- error_code: 200
--- response_body_like eval
qr/^idempotency_requests_total\{outcome="new"\} 2$/m
--- error_log
exited on signal 9
