# A reload that would drop an idempotency zone holding claims or stored
# responses — its size changed, or the zone gone or renamed — is refused with
# an [emerg] naming the zone: nginx would start the new zone empty, and the
# keys in flight or stored would execute again (docs/design.md#the-zone-across-reloads).
# The running configuration stays, so each key executes once. A zone that
# holds nothing live is resized at a reload, and says it starts empty.
use FindBin;
use lib "$FindBin::Bin/lib";
use IdempotencyTest;
use Idem::Blocks qw(counted_location);
use Test::Nginx::Socket 'no_plan';

master_on();
workers(2);
test_nginx_defaults();
run_tests();

# The running configuration, with every $from replaced by $to; returns the
# text it had.
sub rewrite_conf {
    my ($from, $to) = @_;
    my $conf = $Test::Nginx::Util::ConfFile;
    open my $in, '<', $conf or die "cannot read $conf: $!\n";
    my $good = do { local $/; <$in> };
    close $in;
    (my $next = $good) =~ s/\Q$from\E/$to/g or die "\"$from\" is not in the configuration\n";
    open my $out, '>', $conf or die "cannot write $conf: $!\n";
    print {$out} $next;
    close $out;
    return $good;
}

sub put_back_conf {
    my ($good) = @_;
    open my $out, '>', $Test::Nginx::Util::ConfFile or die "cannot write the configuration: $!\n";
    print {$out} $good;
    close $out;
}

# Reloads with $from replaced by $to; the reload must be refused with
# $emerg, and the running workers left as they were.
sub refused_reload {
    my ($from, $to, $emerg) = @_;
    my @workers = IdempotencyTest::worker_pids();
    my $good = rewrite_conf($from, $to);
    kill 'HUP', IdempotencyTest::master_pid();
    my $refused = IdempotencyTest::error_log_has($emerg, 10);
    put_back_conf($good);
    die "the reload was not refused with \"$emerg\"\n" unless $refused;
    my @now = IdempotencyTest::worker_pids();
    die "the workers were replaced (@workers, now @now)\n" unless "@now" eq "@workers";
}

sub replayed {
    my ($res, $what) = @_;
    Test::More::is($res->{status}, 201, "$what: 201");
    Test::More::is($res->{headers}{'idempotent-replayed'}, 'true', "$what: replayed");
}

__DATA__

=== TEST 1: a changed size while a key is stored and another in flight: refused, each key executes once
--- http_config
idempotency_zone zone=resize:1m;
--- config eval
main::counted_location('idempotency_store zone=resize', 'idempotency_wait 30s')
--- init
my $stored = IdempotencyTest::post_key('/zr/1', 'zr-1');
Test::More::is($stored->{status}, 201, 'a key stored');
my $original = IdempotencyTest::start_in_flight('/zr/2?sleep=2', 'zr-2');
main::refused_reload('zone=resize:1m', 'zone=resize:2m',
                     'idempotency_zone "resize": its size changes from 1024K to 2048K while it holds claims');
main::replayed(IdempotencyTest::post_key('/zr/2?sleep=2', 'zr-2'), 'the duplicate of the key in flight');
Test::More::is(IdempotencyTest::read_response($original)->{status}, 201, 'the original');
main::replayed(IdempotencyTest::post_key('/zr/1', 'zr-1'), 'the retry of the stored key');
--- request eval
["GET /_count/zr/1", "GET /_count/zr/2"]
--- response_body eval
["1", "1"]


=== TEST 2: a zone renamed while it holds a stored response: refused, the retry replayed
--- http_config
idempotency_zone zone=before:1m;
--- config eval
main::counted_location('idempotency_store zone=before')
--- init
Test::More::is(IdempotencyTest::post_key('/zr/3', 'zr-3')->{status}, 201, 'a key stored');
main::refused_reload('zone=before', 'zone=after',
                     'idempotency_zone "before" (1024K) is gone from the configuration while it holds claims');
main::replayed(IdempotencyTest::post_key('/zr/3', 'zr-3'), 'the retry');
--- request
GET /_count/zr/3
--- response_body: 1


=== TEST 3: a zone that holds nothing live is resized at a reload, and says it starts empty
--- http_config
idempotency_zone zone=idle:1m;
--- config eval
main::counted_location('idempotency_store zone=idle')
--- init
my @old = IdempotencyTest::worker_pids();
main::rewrite_conf('zone=idle:1m', 'zone=idle:2m');
kill 'HUP', IdempotencyTest::master_pid();
IdempotencyTest::wait_until(sub {
    my %old = map { $_ => 1 } @old;
    my @w = IdempotencyTest::worker_pids();
    @w == 2 && !grep { $old{$_} } @w
}, 10) or die "the new workers did not come up\n";
IdempotencyTest::error_log_has('idempotency zone "idle" (2048K) starts empty', 10)
    or die "the resized zone did not say it starts empty\n";
--- request
POST /zr/4
x
--- more_headers
Idempotency-Key: zr-4
--- error_code: 201
--- error_log
idempotency zone "idle" (1024K) starts empty
--- no_error_log
[emerg]
