# The Debian package (make deb, debian/): libnginx-mod-http-idempotency for
# the packaged nginx, built with dh-sequence-nginx. A plain Test::More file,
# not Test::Nginx: it inspects the .deb with dpkg-deb and checks that the
# packaged .so loads into the packaged /usr/sbin/nginx, from a temporary
# directory; it never installs the package.
#
# It runs `make deb` first: that builds build/deb/*.deb when it is absent
# (about 15 s to a minute, installing the build dependencies if missing) or
# older than the sources, and does nothing otherwise. make's output goes to
# build/deb.log (its tail is shown if it fails).
use strict;
use warnings;
use Test::More;
use FindBin;
use Cwd qw(abs_path);
use File::Temp qw(tempdir);

my $repo  = abs_path("$FindBin::Bin/..");
my $pkg   = 'libnginx-mod-http-idempotency';
my $so    = 'ngx_http_idempotency_module.so';
my $nginx = '/usr/sbin/nginx';    # the packaged binary the package is built for

chdir $repo or die "chdir $repo: $!";

# Runs a command; returns its exit status and its stdout and stderr together.
sub capture {
    my @cmd = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT or die;
        exec @cmd or do { print "exec $cmd[0]: $!\n"; exit 127 };
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or return undef;
    local $/;
    return scalar <$fh>;
}

sub spew {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh $text;
    close $fh or die "$path: $!";
}

# --- build (or confirm up to date) ------------------------------------------

{
    mkdir "$repo/build";
    my $log = "$repo/build/deb.log";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', $log or die "$log: $!";
        open STDERR, '>&', \*STDOUT or die;
        exec 'make', '-C', $repo, 'deb' or exit 127;
    }
    waitpid $pid, 0;
    my $rc = $? >> 8;
    my @log = split /\n/, slurp($log) // '';
    is($rc, 0, 'make deb succeeds (output in build/deb.log)')
        or do { diag(join "\n", @log[($#log > 40 ? $#log - 40 : 0) .. $#log]);
                done_testing(); exit 1 };  # no package to check: this file fails, the run goes on
    diag('make deb built the package') if grep { /^dpkg-deb: building package/ } @log;
}

my ($version) = (slurp("$repo/debian/changelog") // '') =~ /^\S+ \(([^)]+)\)/;
chomp(my $arch = `dpkg --print-architecture`);
my @debs = glob "$repo/build/deb/${pkg}_*.deb";
is(scalar @debs, 1, 'exactly one package in build/deb/') or diag("found: @debs");
my $deb = "$repo/build/deb/${pkg}_${version}_${arch}.deb";
ok(-f $deb, "the package is named after debian/changelog's version: ${pkg}_${version}_${arch}.deb")
    or do { done_testing(); exit 1 };  # nothing to check: this file fails, the run goes on

# --- control fields ----------------------------------------------------------

my %field;
for my $f (qw(Package Version Architecture Section Depends)) {
    my ($rc, $out) = capture('dpkg-deb', '-f', $deb, $f);
    chomp $out;
    $field{$f} = $rc == 0 ? $out : undef;
}
is($field{Package},      $pkg,     'Package');
is($field{Version},      $version, 'Version');
is($field{Architecture}, $arch,    'Architecture');
is($field{Section},      'httpd',  'Section');

my %depends = map { /^\s*(\S+)(?:\s*\((.*)\))?\s*$/ ? ($1 => $2 // '') : () }
              split /,/, $field{Depends} // '';
diag("Depends: " . ($field{Depends} // '(none)'));

# The ABI dh_nginx puts in ${misc:Depends}: nginx-dev's, which the installed
# nginx must provide for the package to install.
my ($abi) = (slurp('/usr/share/nginx/src/debian/libnginx-mod.abisubstvars') // '')
            =~ /^nginx:abi=(\S+)/m;
ok($abi, "nginx-dev's ABI: " . ($abi // '?'));
ok($abi && exists $depends{$abi}, "Depends on $abi (dh_nginx's \${misc:Depends})");
my ($rc_q, $provides) = capture('dpkg-query', '-W', '-f', '${Provides}', 'nginx');
like($provides, qr/(?:^|,\s*)\Q$abi\E(?:\s|,|$)/, "the installed nginx provides $abi")
    if $abi;
# ${shlibs:Depends}: the packages of the libraries the module is linked
# with, as this release names them (Debian 12: libhiredis0.14, libsimdjson14
# and libssl3; Debian 13: libhiredis1.1.0 and libssl3t64).
for my $lib (qw(libhiredis libsimdjson libcrypto)) {
    my ($so) = grep { -e } glob "/usr/lib/*-linux-gnu/$lib.so";
    my $owner = $so ? (capture('dpkg-query', '-S', abs_path($so)))[1] : '';
    my ($runtime) = $owner =~ /^([^:,\s]+)/;
    ok($runtime && exists $depends{$runtime},
       "Depends on " . ($runtime // "the package of $lib.so") . " (\${shlibs:Depends}: $lib)");
}
ok(exists $depends{libc6}, 'Depends on libc6 (${shlibs:Depends})');

# --- contents ------------------------------------------------------------------

my ($rc_c, $listing) = capture('dpkg-deb', '-c', $deb);
is($rc_c, 0, 'dpkg-deb -c');
my %files;    # path => 1, regular files and symlinks only
for (split /\n/, $listing) {
    my @col = split ' ', $_, 6;
    next unless @col == 6 && $col[0] =~ /^[-l]/;
    (my $path = $col[5]) =~ s/ -> .*//;
    $path =~ s{^\./}{/};
    $files{$path} = 1;
}
ok($files{"/usr/lib/nginx/modules/$so"}, "ships /usr/lib/nginx/modules/$so");
ok($files{'/usr/share/nginx/modules-available/mod-http-idempotency.conf'},
   'ships /usr/share/nginx/modules-available/mod-http-idempotency.conf');
ok($files{"/usr/share/doc/$pkg/copyright"}, "ships /usr/share/doc/$pkg/copyright");
ok($files{"/usr/share/doc/$pkg/docs/directives.md.gz"} || $files{"/usr/share/doc/$pkg/docs/directives.md"},
   "ships the directive reference the README links to, /usr/share/doc/$pkg/docs/directives.md");
for my $example ('idempotency.rules.yml', 'idempotency.rules.test.yml', 'idempotency-dashboard.json', 'idempotency-admin',
                 'train-dictionary.sh') {
    ok($files{"/usr/share/doc/$pkg/examples/$example"} || $files{"/usr/share/doc/$pkg/examples/$example.gz"},
       "ships the operator's $example in /usr/share/doc/$pkg/examples/");
}
is_deeply([sort grep { !m{^/usr/share/doc/\Q$pkg\E/} } keys %files],
          ["/usr/lib/nginx/modules/$so",
           '/usr/share/nginx/modules-available/mod-http-idempotency.conf'],
          'nothing else outside its doc directory (no file under /etc)');

my $tmp = tempdir('idempotency-deb-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my ($rc_x, $out_x) = capture('dpkg-deb', '-x', $deb, "$tmp/root");
is($rc_x, 0, 'dpkg-deb -x') or diag($out_x);
is(slurp("$tmp/root/usr/share/nginx/modules-available/mod-http-idempotency.conf"),
   "load_module modules/$so;\n",
   'the load file: load_module modules/' . $so);

# dh_nginx's maintainer scripts enable the module through
# /etc/nginx/modules-enabled/50-mod-http-idempotency.conf.
my ($rc_e, $out_e) = capture('dpkg-deb', '-e', $deb, "$tmp/DEBIAN");
is($rc_e, 0, 'dpkg-deb -e') or diag($out_e);
my $postinst = slurp("$tmp/DEBIAN/postinst") // '';
like($postinst, qr/mod-http-idempotency\.conf:50-mod-http-idempotency\.conf/,
     'postinst links modules-enabled/50-mod-http-idempotency.conf');
like($postinst, qr{ln -sf /usr/share/nginx/modules-available/\$from\s*\\?\s*/etc/nginx/modules-enabled/\$to},
     'postinst symlinks it from modules-available');
like(slurp("$tmp/DEBIAN/postrm") // '', qr/mod-http-idempotency\.conf/,
     'postrm removes the link on purge');

# --- the packaged .so loads into the packaged nginx ----------------------------

my $mod = "$tmp/root/usr/lib/nginx/modules/$so";
my @nginx_t = ($nginx, '-t', '-p', "$tmp/", '-g', 'error_log stderr; pid /dev/null;');

spew("$tmp/load.conf", "load_module $mod;\nevents {}\n");
my ($rc_t, $out_t) = capture(@nginx_t, '-c', "$tmp/load.conf");
is($rc_t, 0, "nginx -t loads the packaged $so") or diag($out_t);

# Its directives are registered: a configuration that uses them passes with
# the module loaded and is refused without it.
my $http = <<"EOF";
events {}
http {
    access_log off;
    client_body_temp_path $tmp/body;
    proxy_temp_path       $tmp/proxy;
    fastcgi_temp_path     $tmp/fastcgi;
    uwsgi_temp_path       $tmp/uwsgi;
    scgi_temp_path        $tmp/scgi;
    idempotency_redis 127.0.0.1:6379;
    server {
        listen 127.0.0.1:8080;
        location / {
            idempotency          on;
            idempotency_required on;
            return 204;
        }
    }
}
EOF
spew("$tmp/http.conf", "load_module $mod;\n$http");
($rc_t, $out_t) = capture(@nginx_t, '-c', "$tmp/http.conf");
is($rc_t, 0, 'nginx -t accepts the module\'s directives with the packaged .so') or diag($out_t);
spew("$tmp/without.conf", $http);
($rc_t, $out_t) = capture(@nginx_t, '-c', "$tmp/without.conf");
isnt($rc_t, 0, 'and refuses them without it');
like($out_t, qr/unknown directive "idempotency_redis"/, '(unknown directive "idempotency_redis")');

# --- the repository stays clean: the build ran in build/deb/src ----------------

my @left = grep { -e "$repo/$_" }
           qw(debian/files debian/.debhelper debian/debhelper-build-stamp
              debian/libnginx-mod-http-idempotency debian/tmp
              debian/libnginx-mod-http-idempotency.substvars);
push @left, map { s{^\Q$repo\E/}{}r } glob "$repo/obj-*";
is_deeply(\@left, [], 'no build artefacts in the repository\'s debian/');

done_testing();
