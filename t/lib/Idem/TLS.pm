# Idem/TLS.pm — certificates made with openssl on first use, and a
# redis-server with a TLS port. Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::TLS;
#     my $t = Idem::TLS::tls_files();           # $t->{ca}, $t->{server}, ...
#     my ($plain, $tls) = Idem::TLS::start_redis_tls();
#
# API (nothing is exported):
#   tls_files()        made once, in the run's temp dir (also sets
#                      TEST_NGINX_TLS_DIR); a hashref of paths: dir, ca,
#                      other-ca; server (localhost, 127.0.0.1; by ca),
#                      other-server (the same names; by other-ca),
#                      wrong-name (redis.example.net only; by ca), client
#                      (by ca), other-client (by other-ca): each NAME (the
#                      .pem) with NAME-key (the .key). Readable by all
#                      (nginx workers may run as another user).
#   redis_tls_args($tls_port, [$cert])
#                      redis-server's arguments for a TLS port with
#                      certificate $cert (default server), clients
#                      unchecked (add --tls-auth-clients yes after them)
#   start_redis_tls(%o)
#                      an Idem::Redis node with a plain port (for the
#                      test's own commands) and a TLS port; o{cert}
#                      (server, other-server or wrong-name), o{args} (more
#                      arguments). Returns (plain port, TLS port); restart
#                      it with Idem::Redis::node_stop/node_start(plain)

package Idem::TLS;

use strict;
use warnings;

use File::Path qw(make_path);

use Idem::Ports;
use Idem::Proc;
use Idem::Redis;

my $tls;    # the certificates, once made

sub openssl {
    my (@args) = @_;
    my $out = `openssl @args 2>&1`;
    die "Idem::TLS: openssl @args failed:\n$out" if $?;
}

# A key and a certificate NAME.pem signed by $ca (undef: self-signed CA).
sub make_cert {
    my ($dir, $name, $subject, $ca, $san) = @_;
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', "$dir/$name.key");
    if (!defined $ca) {
        openssl('req', '-x509', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.pem", '-days', 2,
                '-subj', "'/CN=$subject'", '-addext', "'basicConstraints=critical,CA:TRUE'",
                '-addext', "'keyUsage=critical,keyCertSign,cRLSign'");
        return;
    }
    open my $fh, '>', "$dir/$name.ext" or die "Idem::TLS: $dir/$name.ext: $!\n";
    print {$fh} "basicConstraints=CA:FALSE\n" . ($san ? "subjectAltName=$san\n" : '');
    close $fh;
    openssl('req', '-new', '-key', "$dir/$name.key", '-out', "$dir/$name.csr", '-subj', "'/CN=$subject'");
    openssl('x509', '-req', '-in', "$dir/$name.csr", '-CA', "$dir/$ca.pem", '-CAkey', "$dir/$ca.key",
            '-CAcreateserial', '-out', "$dir/$name.pem", '-days', 2, '-extfile', "$dir/$name.ext");
}

sub tls_files {
    return $tls if $tls;
    my $dir = Idem::Proc::tmpdir() . '/tls';
    make_path($dir);
    make_cert($dir, 'ca', 'Idempotency Test CA');
    make_cert($dir, 'other-ca', 'Another CA');
    make_cert($dir, 'server', 'localhost', 'ca', 'DNS:localhost,IP:127.0.0.1');
    make_cert($dir, 'other-server', 'localhost', 'other-ca', 'DNS:localhost,IP:127.0.0.1');
    make_cert($dir, 'wrong-name', 'redis.example.net', 'ca', 'DNS:redis.example.net');
    make_cert($dir, 'client', 'gateway', 'ca');
    make_cert($dir, 'other-client', 'gateway', 'other-ca');
    chmod 0644, glob "$dir/*";
    $ENV{TEST_NGINX_TLS_DIR} = $dir;
    $tls = { dir => $dir, map { ($_ => "$dir/$_.pem", "$_-key" => "$dir/$_.key") }
             qw(ca other-ca server other-server wrong-name client other-client) };
    return $tls;
}

sub redis_tls_args {
    my ($tls_port, $cert) = @_;
    my $t = tls_files();
    return ('--tls-port', $tls_port, '--tls-cert-file', $t->{$cert // 'server'},
            '--tls-key-file', $t->{($cert // 'server') . '-key'}, '--tls-ca-cert-file', $t->{ca},
            '--tls-auth-clients', 'no');
}

sub start_redis_tls {
    my (%o) = @_;
    my ($plain, $tls_port) = (Idem::Ports::free_port(), Idem::Ports::free_port());
    Idem::Redis::start_node($plain, '--bind', '127.0.0.1', '--port', $plain, '--save', '', '--appendonly', 'no',
                            redis_tls_args($tls_port, $o{cert}), @{ $o{args} || [] });
    return ($plain, $tls_port);
}

1;
