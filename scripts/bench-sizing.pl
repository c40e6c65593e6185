#!/usr/bin/env perl
# bench-sizing.pl — what a stored response costs the store's memory
# (docs/performance.md#sizing), for realistic bodies (scripts/Bodies.pm): a
# 300 B JSON acknowledgement, a 2 KB payment object, a 20 KB list, a
# 256 KB document and a 50 KB event-stream transcript, each kept plain
# (idempotency_compress off) and compressed, and the two small JSON kinds
# also with a dictionary trained on 300 other objects of each
# (scripts/train-dictionary.sh). scripts/bench.sh runs it
# (`make bench`); also runnable alone.
#
#   scripts/bench-sizing.pl [--quick] [--out FILE] [--keep]
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
# redis-server (--save '' --appendonly no) and a gateway (nginx with the
# module, 1 worker) with two locations on Redis (compression on, and off)
# and two on a 16 MB zone, proxied (keep-alive, `proxy_method GET`) to a
# second server of the same nginx that serves the bodies as static files.
#
# Redis: for each body and form, one real request stores its record (the
# module's own bytes, headers included); then, on an emptied Redis, that
# record is written under N fresh store keys of the module's shape
# ("idem:" + 64 hex digits) with the module's expiry (PX), pipelined, and
# INFO memory's used_memory before and after gives the bytes per record:
# the record, and Redis's overhead per key (key, value object, expiry).
# N is 100,000, or fewer for large records (at most about 2 GB of values).
# The zone: fresh keys are stored through the gateway until the zone has
# no room for one more response (idempotency_zone_full_total), a zone of
# 16 MB each time: its size over the records it held is the bytes per
# record there (records, their tree nodes, the slab's rounding). Bounded:
# at most 200,000 requests per zone fill, and 10 minutes in all.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib";
use lib $FindBin::Bin;

use Getopt::Long qw(GetOptions);
use IO::Socket::INET;
use Time::HiRes qw(time);

use Bodies ();
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();

my ($quick, $out, $keep) = (0, undef, 0);
GetOptions('quick' => \$quick, 'out=s' => \$out, 'keep' => \$keep) or die "usage: $0 [--quick] [--out FILE] [--keep]\n";

use constant { ZONE_MB => 16, MAX_FILL => 200_000, DEADLINE => 600, VALUE_BUDGET => 2_000_000_000 };
my $deadline = time + DEADLINE;

# body kind, size (undef: the kind's own), label
my @BODIES = (['ack', 300, '300 B JSON acknowledgement'], ['payment', 2048, '2 KB payment object'],
              ['list', 20480, '20 KB JSON list'], ['document', 262144, '256 KB document'],
              ['transcript', 51200, '50 KB SSE transcript']);
my $N = $quick ? 10_000 : 100_000;

my $dir = Idem::Proc::init(prefix => 'idempotency-bench-sizing');
Idem::Proc::keep(1) if $keep;
Idem::Redis::start_redis();
my $redis_port = Idem::Redis::redis_port();

# The bodies, as static files the gateway's second server (the upstream) serves.
mkdir "$dir/static" or die "$dir/static: $!\n";
for my $b (@BODIES) {
    my ($body) = Bodies::body($b->[0], $b->[1]);
    open my $fh, '>', "$dir/static/$b->[0]" or die "$dir/static/$b->[0]: $!\n";
    print {$fh} $body;
    close $fh;
}
chmod 0755, "$dir/static";
chmod 0644, glob "$dir/static/*";

# A dictionary for the small JSON kinds (idempotency_compress_dictionary),
# trained on 300 other objects of each (other seeds than the ones served).
my @DICTIONARY_KINDS = qw(ack payment);
mkdir "$dir/samples" or die "$dir/samples: $!\n";
for my $b (grep { my $k = $_->[0]; grep { $_ eq $k } @DICTIONARY_KINDS } @BODIES) {
    for my $seed (1 .. 300) {
        my ($body) = Bodies::body($b->[0], $b->[1], $seed);
        open my $fh, '>', "$dir/samples/$b->[0]-$seed" or die "$dir/samples: $!\n";
        print {$fh} $body;
        close $fh;
    }
}
system("$FindBin::Bin/train-dictionary.sh", "$dir/api.dict", "$dir/samples") == 0 or die "no dictionary\n";

my $loc = sub {
    my ($path, @d) = @_;
    return join "\n", "location $path {", (map {"    $_;"} 'idempotency on', 'idempotency_scope ""',
        'idempotency_max_response_size 1m', @d, 'proxy_method GET', 'proxy_pass http://backend/static/'), '}';
};
my $start_gateway = sub { Idem::Nginx::nginx_start('sizing', workers => 1, ports => 1,
    http => sub { "access_log off;\ndefault_type application/json;\n"
          . "upstream backend { server 127.0.0.1:$_[0]{ports}[0]; keepalive 8; }\n"
          . "server { listen 127.0.0.1:$_[0]{ports}[0]; location /static/ { root $dir; } }\n"
          . "idempotency_redis 127.0.0.1:$redis_port;\n" . 'idempotency_zone zone=sizing:' . ZONE_MB . "m;\n" },
    server => join "\n", 'server_name localhost;', 'proxy_http_version 1.1;', 'proxy_set_header Connection "";',
        $loc->('/redis/compressed/'), $loc->('/redis/plain/', 'idempotency_compress off'),
        $loc->('/redis/dictionary/', "idempotency_compress_dictionary $dir/api.dict"),
        $loc->('/zone/compressed/', 'idempotency_store zone=sizing'),
        $loc->('/zone/plain/', 'idempotency_store zone=sizing', 'idempotency_compress off'),
        $loc->('/zone/dictionary/', 'idempotency_store zone=sizing', "idempotency_compress_dictionary $dir/api.dict"),
        'location = /metrics { idempotency_metrics; }') };
my $gw = $start_gateway->();

# One HTTP/1.1 keep-alive connection to the gateway.
my $conn;
sub http {
    my ($method, $path, $key) = @_;
    for my $attempt (1, 2) {
        $conn //= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}, Timeout => 10)
            or die "connect: $!\n";
        my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\n" . (defined $key ? "Idempotency-Key: $key\r\n" : '')
                . ($method eq 'POST' ? "Content-Length: 1\r\n\r\nx" : "\r\n");
        next unless print {$conn} $req;
        my ($head, $buf) = ('', '');
        while ($head !~ /\r\n\r\n/) {
            my $n = sysread($conn, $buf, 65536);
            last unless $n;
            $head .= $buf;
        }
        if ($head !~ /\r\n\r\n/) { undef $conn; next; }
        my ($h, $body) = split /\r\n\r\n/, $head, 2;
        my ($status) = $h =~ m{\AHTTP/1\.1 (\d+)} or die "bad answer\n";
        my ($len) = $h =~ /^Content-Length: (\d+)/mi;
        die "no Content-Length from $path\n" unless defined $len;
        while (length $body < $len) {
            my $n = sysread($conn, $buf, $len - length $body) or die "cut short\n";
            $body .= $buf;
        }
        undef $conn if $h =~ /^Connection: close/mi;
        return ($status, $body);
    }
    die "no answer from the gateway for $path\n";
}

sub metric {
    my ($name) = @_;
    my (undef, $page) = http('GET', '/metrics');
    return $page =~ /^\Q$name\E (\d+)$/m ? $1 : 0;
}

sub redis { Idem::Redis::redis_command(@_) }
sub used_memory { redis('INFO', 'memory') =~ /^used_memory:(\d+)/m ? $1 : die "no used_memory\n" }

# The forms a kind is kept in: plain, compressed, and with the dictionary
# for the kinds it was trained for.
sub forms {
    my ($kind) = @_;
    return ('plain', 'compressed', (grep { $_ eq $kind } @DICTIONARY_KINDS) ? ('dictionary') : ());
}

# Writes $n copies of $value under fresh store keys with expiry $px, pipelined.
sub fill_redis {
    my ($value, $px, $n, $tag) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $redis_port) or die "redis: $!\n";
    my ($sent, $batch) = (0, 1000);
    while ($sent < $n) {
        my $k = $batch < $n - $sent ? $batch : $n - $sent;
        my $cmds = '';
        for my $i ($sent .. $sent + $k - 1) {
            my $key = sprintf 'idem:%016x%048x', $tag, $i;
            $cmds .= sprintf "*5\r\n\$3\r\nSET\r\n\$%d\r\n%s\r\n\$%d\r\n%s\r\n\$2\r\nPX\r\n\$%d\r\n%s\r\n",
                length $key, $key, length $value, $value, length $px, $px;
        }
        print {$s} $cmds or die "redis write: $!\n";
        my ($got, $buf) = (0, '');
        while ($got < $k) {
            sysread($s, $buf, 65536, length $buf) or die "redis read: $!\n";
            $got = () = $buf =~ /\+OK\r\n/g;
        }
        $sent += $k;
        die "over the time budget\n" if time > $deadline;
    }
}

my (@redis_rows, @zone_rows, %per);
my $tag = 0;
for my $b (@BODIES) {
    my ($kind, $size, $label) = @$b;
    for my $form (forms($kind)) {
        redis('FLUSHALL');
        my ($status) = http('POST', "/redis/$form/$kind", "sizing-$kind-$form");
        die "$kind $form: $status\n" unless $status == 200;
        my ($keys, $value);
        for (1 .. 100) {    # the store lands just after the answer
            $keys = redis('KEYS', 'idem:*');
            $value = @$keys == 1 ? redis('GET', $keys->[0]) : undef;
            last if defined $value && substr($value, 4, 1) eq "\x02";
            select undef, undef, undef, 0.05;
        }
        die "$kind $form: no stored response\n" unless defined $value && substr($value, 4, 1) eq "\x02";
        my $px = redis('PTTL', $keys->[0]);
        my $n = int(VALUE_BUDGET / length $value);
        $n = $N if $n > $N;
        redis('FLUSHALL');
        my $before = used_memory();
        fill_redis($value, $px, $n, ++$tag);
        my $after = used_memory();
        redis('FLUSHALL');
        my $per = ($after - $before) / $n;
        $per{redis}{$kind}{$form} = $per;
        push @redis_rows, [$label, $form, length $value, $n, $per];
        printf STDERR "  redis %-28s %-10s record %7d B, %6d records: %8.0f B each\n", $label, $form, length $value, $n, $per;
    }
}

for my $b (@BODIES) {
    my ($kind, $size, $label) = @$b;
    for my $form (forms($kind)) {
        # a fresh zone each time: a new configuration generation would keep
        # the old zone; a restart of the gateway's nginx empties it
        Idem::Nginx::nginx_stop($gw);
        undef $conn;
        $gw = $start_gateway->();
        my $full0 = metric('idempotency_zone_full_total{operation="store"}');
        my ($stored, $step) = (0, 1);
        while ($stored < MAX_FILL && time < $deadline) {
            my ($status) = http('POST', "/zone/$form/$kind", "zone-$kind-$form-$tag-$stored");
            die "zone $kind $form: $status\n" unless $status == 200 || $status == 503;
            last if $status == 503;    # no room for a claim
            $stored++;
            next if $stored % $step;
            last if metric('idempotency_zone_full_total{operation="store"}') > $full0;
            $step = $stored < 1000 ? 1 : 50;
        }
        $tag++;
        my $per = ZONE_MB * 1024 * 1024 / ($stored || 1);
        $per{zone}{$kind}{$form} = $per;
        push @zone_rows, [$label, $form, $stored, $per];
        printf STDERR "  zone  %-28s %-10s %6d records in %d MB: %8.0f B each\n", $label, $form, $stored, ZONE_MB, $per;
    }
}
Idem::Nginx::nginx_stop($gw);

my $report = '';
$report .= "**Redis** (redis-server " . (redis('INFO', 'server') =~ /^redis_version:(\S+)/m ? $1 : '?')
         . ", jemalloc): `used_memory` after N records of the module's own bytes under fresh keys with their expiry, less before, ÷ N.\n\n";
$report .= "| response | record | record bytes | N | Redis bytes per record | ÷ plain |\n|---|---|---:|---:|---:|---:|\n";
for my $r (@redis_rows) {
    my ($label, $form, $len, $n, $per) = @$r;
    my ($kind) = map { $_->[0] } grep { $_->[2] eq $label } @BODIES;
    my $ratio = $form ne 'plain' ? sprintf('%.2f', $per / $per{redis}{$kind}{plain}) : '';
    $report .= sprintf "| %s | %s | %d | %d | %.0f | %s |\n", $label, $form, $len, $n, $per, $ratio;
}
$report .= "\n**Zone store** (" . ZONE_MB . " MB zones): the zone's size over the responses it held before it had no room for one more.\n\n";
$report .= "| response | record | records in " . ZONE_MB . " MB | zone bytes per record | ÷ plain |\n|---|---|---:|---:|---:|\n";
for my $r (@zone_rows) {
    my ($label, $form, $stored, $per) = @$r;
    my ($kind) = map { $_->[0] } grep { $_->[2] eq $label } @BODIES;
    my $ratio = $form ne 'plain' ? sprintf('%.2f', $per / $per{zone}{$kind}{plain}) : '';
    $report .= sprintf "| %s | %s | %d | %.0f | %s |\n", $label, $form, $stored, $per, $ratio;
}
if ($out) {
    open my $fh, '>', $out or die "$out: $!\n";
    print {$fh} $report;
    close $fh;
}
print $report;
