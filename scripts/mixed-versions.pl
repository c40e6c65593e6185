#!/usr/bin/env perl
# mixed-versions.pl — two gateways of different releases on one Redis, as
# during a rolling upgrade (docs/operations.md#upgrading): this build and
# an older one (make mixed-versions builds it from MIXED_OLD_REF). Each
# writes records the other then reads: a record of a layout the older
# release does not know (a response kept in pieces, one compressed with a
# dictionary) must be answered 410 there, the upstream not contacted
# again; every record the older release writes, and every one of a layout
# it knows, is replayed by either.
#
#   scripts/mixed-versions.pl --old PATH/ngx_http_idempotency_module.so
#
# Started here, on free loopback ports, stopped by pid at exit (t/lib/Idem):
# redis-server, a static upstream (a server of the new gateway's nginx,
# which logs each request it serves), and the two gateways. Prints a
# table; exits 1 when a case is not as expected.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib";
use lib $FindBin::Bin;

use Getopt::Long qw(GetOptions);
use IO::Socket::INET;

use Bodies ();
use Idem::Nginx ();
use Idem::Proc ();
use Idem::Redis ();

my $old;
GetOptions('old=s' => \$old) or die "usage: $0 --old MODULE.so\n";
die "usage: $0 --old MODULE.so\n" unless $old && -f $old;

my $dir = Idem::Proc::init(prefix => 'idempotency-mixed');
Idem::Redis::start_redis();
my $redis_port = Idem::Redis::redis_port();

# the bodies, served as static files by the upstream
mkdir "$dir/static" or die "$dir/static: $!\n";
my %bodies = (pieces => ['noise', 5 * 1024 * 1024], payment => ['payment', 2048], list => ['list', 20480],
              small => ['ack', 300]);
for my $name (keys %bodies) {
    my ($body) = Bodies::body(@{ $bodies{$name} });
    open my $fh, '>', "$dir/static/$name" or die "$dir/static: $!\n";
    print {$fh} $body;
    close $fh;
}
chmod 0755, "$dir/static";
chmod 0644, glob "$dir/static/*";

# a dictionary for the new gateway
mkdir "$dir/samples" or die;
for my $seed (1 .. 300) {
    my ($body) = Bodies::body('payment', 2048, $seed);
    open my $fh, '>', "$dir/samples/$seed" or die;
    print {$fh} $body;
    close $fh;
}
system("$FindBin::Bin/train-dictionary.sh", "$dir/api.dict", "$dir/samples") == 0 or die "no dictionary\n";

my $upstream_port;
my $location = sub {
    my ($path, @more) = @_;
    return join "\n", "location $path {", (map {"    $_;"} 'idempotency on', 'idempotency_scope ""', @more,
        'proxy_method GET', "proxy_pass http://127.0.0.1:$upstream_port/static/"), '}';
};
my $http = sub { "idempotency_redis 127.0.0.1:$redis_port;\n" };

my $new = Idem::Nginx::nginx_start('new', workers => 1, ports => 1,
    http => sub {
        $upstream_port = $_[0]{ports}[0];
        $http->() . "server { listen 127.0.0.1:$upstream_port; "
            . "access_log $dir/upstream.log; location /static/ { root $dir; } }\n" },
    server => sub { join "\n", 'server_name localhost;',
        $location->('/m/', 'idempotency_max_response_size 64m', 'idempotency_piece_size 1m',
            "idempotency_compress_dictionary $dir/api.dict"),
        $location->('/p/') });
{
    local $ENV{STRESS_MODULE} = $old;
    our $gw_old = Idem::Nginx::nginx_start('old', workers => 1, http => $http,
        server => sub { join "\n", 'server_name localhost;', $location->('/m/'), $location->('/p/') });
}
my $old_gw = our $gw_old;

sub post {
    my ($gw, $path, $key) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}, Timeout => 30)
        or die "connect: $!\n";
    print {$s} "POST $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nIdempotency-Key: $key\r\n"
             . "Content-Length: 1\r\n\r\nx";
    my $buf = '';
    while (sysread($s, $buf, 1 << 20, length $buf)) { }
    close $s;
    my ($status) = $buf =~ m{\AHTTP/1\.1 (\d+)};
    my $replayed = $buf =~ /^Idempotent-Replayed: true/mi ? 'replay' : '';
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    return ($status // 0, $replayed, $body // '');
}

sub executions {
    my ($name) = @_;
    open my $fh, '<', "$dir/upstream.log" or return 0;
    return scalar grep { m{ /static/\Q$name\E } } <$fh>;
}

# writer, reader, location, body, expected status and kind of the retry
my @cases = (
    [$new, 'new', $old_gw, 'old', '/m/', 'pieces', '410', '', 'a response kept in pieces (version 4)'],
    [$new, 'new', $old_gw, 'old', '/m/', 'payment', '410', '', 'a record compressed with a dictionary'],
    [$new, 'new', $old_gw, 'old', '/p/', 'list', '200', 'replay', 'a record compressed without one'],
    [$new, 'new', $old_gw, 'old', '/p/', 'small', '200', 'replay', 'a small record, kept plain'],
    [$old_gw, 'old', $new, 'new', '/m/', 'list', '200', 'replay', "the older release's compressed record"],
);
my ($bad, %seen, %ok_runs) = (0);
my $report = "| written by | read by | record | retry | expected | upstream executions |\n|---|---|---|---|---|---:|\n";
for my $c (@cases) {
    my ($w, $wn, $r, $rn, $path, $name, $want, $kind, $label) = @$c;
    my $key = "mixed-$wn-$name";
    my ($s1, undef, $body1) = post($w, "$path$name", $key);
    die "$label: the original got $s1\n" unless $s1 == 200;
    my ($s2, $k2, $body2) = post($r, "$path$name", $key);
    my $got = "$s2" . ($k2 ? " $k2" : '');
    my $expected = "$want" . ($kind ? " $kind" : '');
    my $runs = executions($name);
    $ok_runs{$name} = $runs;
    my $ok = $got eq $expected && $runs == ($seen{$name}++ ? 2 : 1) && (!$kind || $body2 eq $body1);
    $bad++ unless $ok;
    $report .= sprintf "| %s | %s | %s | %s | %s | %d |%s\n", $wn, $rn, $label, $got, $expected, $runs,
        $ok ? '' : ' **not as expected**';
}
Idem::Nginx::nginx_stop($_) for $old_gw, $new;
print $report;
print $bad ? "mixed-versions: $bad case(s) not as expected\n" : "mixed-versions: every case as expected\n";
exit($bad ? 1 : 0);
