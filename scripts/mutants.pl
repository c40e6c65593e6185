#!/usr/bin/env perl
# mutants.pl — the suite's mutation run (make mutants): each mutation of
# t/mutants.list — a file, the exact text, its replacement, the tests that
# should catch it — applied alone to a copy of the tree (never the working
# tree), the module (and the unit binary, when the mutation names unit
# tests) rebuilt there, and the tests it names run against that build. A
# mutation is killed when one of its tests fails (or does not end within
# the time allowed), survives when all pass. Prints one line per mutation
# and the kill rate; exits non-zero when the rate is under
# MUTANTS_MIN_RATE (90 %), when a mutation's text is not found exactly
# once, when a mutant does not build, or, with --baseline, when the
# unmutated build fails a test. Not in CI: a whole run takes about an
# hour on 2 cores (t/README.md#mutation-testing says how to add one).
#
#   scripts/mutants.pl [--only ID,ID...] [--baseline | --baseline-only] [--check] [--list]
#
#   --only      these mutations alone (their ids, or prefixes ending in '*')
#   --baseline  first, every test selection once against the unmutated copy
#               (--baseline-only: that alone)
#   --check     only check that each mutation's text is found exactly once
#               in the working tree (no build, no test)
#   --list      the ids and what each breaks
#
# The copy lives in $MUTANTS_DIR (default build/mutants/): src/ (the tree
# as it is now, tracked and untracked files alike; a later run rewrites
# only the files that changed, so that it recompiles only those), with its nginx build tree in
# src/build/nginx configured once (the Makefile's own rule), the unit
# objects in src/build/mutants-unit/, and the ASan build (a mutation marked
# `asan: yes`) in src/build/asan/. Test::Nginx's server root and the
# results (last-run.txt) beside src/.
#
# The list's format (t/mutants.list opens with it):
#   === ID: what the mutation breaks
#   file: module/...            the file changed
#   tests: SPEC SPEC ...        t/NNN-name.t[:N,N...][@zone|@cluster][%SERVER]:
#                               the file, or only those blocks of it, on
#                               that store, on that store server
#                               (scripts/store-server.sh SERVER: valkey-9...,
#                               TEST_REDIS_SERVER) instead of the machine's
#                               Redis; unit[:FILTER]: the unit tests (gtest
#                               filter)
#   asan: yes                   (optional) the tests run against the ASan build
#   --- find
#   the exact text (its lines; trailing blank lines are not part of it)
#   --- replace
#   its replacement (nothing: the text is removed)
# A section ends at the next === line, or at a line that begins with '#'
# after a blank one (a comment between mutations).

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path remove_tree);
use Getopt::Long qw(GetOptions);
use POSIX qw(strftime WNOHANG);
use Time::HiRes qw(time);

my $repo = abs_path(dirname(__FILE__) . '/..');
my $list_file = "$repo/t/mutants.list";
my $work = $ENV{MUTANTS_DIR} // "$repo/build/mutants";
my $src = "$work/src";
my $nginx_bin = $ENV{NGINX_BIN} // (grep { -x } map { "$_/nginx" } split /:/, "$ENV{PATH}:/usr/sbin")[0]
    // '/usr/sbin/nginx';
my $test_timeout = $ENV{MUTANTS_TEST_TIMEOUT} // 600;    # s: a test selection that runs longer is a hang
my $min_rate = $ENV{MUTANTS_MIN_RATE} // 90;              # %: a run that kills fewer fails

my ($only, $baseline, $baseline_only, $check, $list);
GetOptions('only=s' => \$only, 'baseline' => \$baseline, 'baseline-only' => \$baseline_only, 'check' => \$check,
           'list' => \$list)
    or die "usage: $0 [--only ID,...] [--baseline | --baseline-only] [--check] [--list]\n";
$baseline ||= $baseline_only;

my @mutants = read_list($list_file);
if (defined $only) {
    my @want = split /,/, $only;
    @mutants = grep { my $id = $_->{id}; grep { /\*$/ ? index($id, substr($_, 0, -1)) == 0 : $id eq $_ } @want } @mutants;
    die "no mutation matches --only $only\n" unless @mutants;
}
if ($list) {
    printf "%-36s %s\n", $_->{id}, $_->{what} for @mutants;
    exit 0;
}

# ------------------------------------------------------------------ the list

sub read_list {
    my ($path) = @_;
    open my $fh, '<', $path or die "$path: $!\n";
    my (@all, $m, $section, %ids);
    my $finish = sub {
        return unless $m;
        for my $part (qw(find replace)) {
            my $text = join "\n", @{ $m->{$part} // [] };
            $text =~ s/\n+\z//;
            $m->{$part} = $text;
        }
        die "$path: $m->{id}: no file\n" unless $m->{file};
        die "$path: $m->{id}: no tests\n" unless @{ $m->{tests} // [] };
        die "$path: $m->{id}: no text to find\n" unless length $m->{find};
        die "$path: $m->{id}: the replacement is the text itself\n" if $m->{find} eq $m->{replace};
        push @all, $m;
    };
    while (my $line = <$fh>) {
        chomp $line;
        if ($line =~ /^=== ([\w.-]+): (.*)$/) {
            $finish->();
            die "$path: $1 twice\n" if $ids{$1}++;
            $m = { id => $1, what => $2, line => $. };
            $section = 'head';
            next;
        }
        next unless $m;
        if ($line =~ /^--- (find|replace)$/) {
            $section = $1;
            $m->{$section} = [];
            next;
        }
        # a comment at the start of a line after a blank one ends a section
        if ($section ne 'head' && $line =~ /^#/ && @{ $m->{$section} } && $m->{$section}[-1] eq '') {
            $finish->();
            $m = undef;
            next;
        }
        if ($section eq 'head') {
            next if $line =~ /^\s*(#.*)?$/;
            my ($key, $value) = $line =~ /^(\w+):\s*(.*?)\s*$/ or die "$path:$.: not 'key: value': $line\n";
            if ($key eq 'tests') { $m->{tests} = [ split ' ', $value ] }
            elsif ($key eq 'file' || $key eq 'asan') { $m->{$key} = $value }
            else { die "$path:$.: unknown key $key\n" }
            next;
        }
        push @{ $m->{$section} }, $line;
    }
    $finish->();
    return @all;
}

# Each mutation's text is in its file once (in `$root`'s tree).
sub check_texts {
    my ($root) = @_;
    my $bad = 0;
    for my $m (@mutants) {
        my $text = slurp("$root/$m->{file}");
        my $n = () = $text =~ /\Q$m->{find}\E/g;
        next if $n == 1;
        print "$m->{id}: its text is found $n times in $m->{file}\n";
        $bad++;
    }
    return $bad;
}

if ($check) {
    my $bad = check_texts($repo);
    print scalar(@mutants) . " mutations, " . ($bad ? "$bad whose text is not found once" : 'each text found once') . "\n";
    exit($bad ? 1 : 0);
}

# ------------------------------------------------------------------ the copy

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "$path: $!\n";
    local $/;
    return scalar <$fh>;
}

sub spew {
    my ($path, $text) = @_;
    open my $fh, '>', "$path.tmp" or die "$path.tmp: $!\n";
    print {$fh} $text;
    close $fh or die "$path.tmp: $!\n";
    rename "$path.tmp", $path or die "$path: $!\n";
}

# Runs a command, its output into $log; true when it exited 0 within $secs.
sub run_logged {
    my ($log, $secs, %env) = (shift, shift, %{ shift() });
    my @cmd = @_;
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        setpgrp(0, 0);
        @ENV{ keys %env } = values %env;
        open STDOUT, '>>', $log or exit 127;
        open STDERR, '>&', \*STDOUT or exit 127;
        exec @cmd or exit 127;
    }
    my $deadline = time + $secs;
    while (1) {
        my $done = waitpid($pid, WNOHANG);
        return ($? == 0, 0) if $done == $pid;
        if (time > $deadline) {
            kill 'TERM', -$pid;
            my $grace = time + 10;
            while (waitpid($pid, WNOHANG) == 0 && time < $grace) { select undef, undef, undef, 0.2 }
            kill 'KILL', -$pid;
            waitpid($pid, 0);
            return (0, 1);
        }
        select undef, undef, undef, 0.2;
    }
}

# The tree as it is now, into src/: a file whose bytes differ from the
# copy's is written (its mtime now, so that every build of it is made
# again); one that is the same is left with its mtime, which is later than
# any object built from a mutation of it (the file was written back after).
sub copy_tree {
    make_path($src);
    my $files = `cd '$repo' && git ls-files -co --exclude-standard -z`;
    die "git ls-files failed\n" if $?;
    for my $f (split /\0/, $files) {
        my $from = "$repo/$f";
        next unless -f $from;
        my $bytes = slurp($from);
        next if -f "$src/$f" && slurp("$src/$f") eq $bytes;
        make_path(dirname("$src/$f"));
        spew("$src/$f", $bytes);
        chmod((stat $from)[2] & 07777, "$src/$f");
    }
}

# The Makefile's list of the core's sources, its unit flags and libraries.
sub unit_setup {
    my $make = slurp("$src/Makefile");
    my ($core) = $make =~ /^CORE_SRCS\s*:=\s*(.*)$/m or die "Makefile: no CORE_SRCS\n";
    my ($flags) = $make =~ /^CXXFLAGS\s*\?=\s*(.*)$/m or die "Makefile: no CXXFLAGS\n";
    my ($libs) = $make =~ /^\s*\$\(CXX\) \$\(CXXFLAGS\) .* -o \$@ (.*)$/m or die "Makefile: no unit link line\n";
    my @units = map { s{^\Q$src\E/}{}r } sort glob "$src/t/unit/*.cpp";
    return { core => [ split ' ', $core ], units => \@units, flags => [ split ' ', $flags ], libs => [ split ' ', $libs ] };
}

my $unit;

# The unit binary of the copy: each source compiled once it is newer than
# its object, or a header is; then linked.
sub build_unit {
    my ($log) = @_;
    $unit //= unit_setup();
    my $dir = "$src/build/mutants-unit";
    make_path($dir);
    my $headers = 0;
    for my $h (glob("$src/module/*.hpp"), glob("$src/module/*/*.hpp")) {
        my $m = (stat $h)[9];
        $headers = $m if $m > $headers;
    }
    my $cxx = $ENV{CXX} // 'g++';
    my @objects;
    my $relink = !-e "$dir/unit_tests";
    for my $s (@{ $unit->{core} }, @{ $unit->{units} }) {
        (my $o = $s) =~ s{[/.]}{_}g;
        $o = "$dir/$o.o";
        push @objects, $o;
        my $om = -e $o ? (stat $o)[9] : 0;
        next if $om >= (stat "$src/$s")[9] && $om >= $headers;
        my ($ok) = run_logged($log, 600, {}, 'sh', '-c', "cd '$src' && $cxx @{ $unit->{flags} } -Imodule -c $s -o $o");
        return 0 unless $ok;
        $relink = 1;
    }
    return 1 unless $relink || (stat "$dir/unit_tests")[9] < (sort { $b <=> $a } map { (stat $_)[9] } @objects)[0];
    my ($ok) = run_logged($log, 600, {}, $cxx, @objects, '-o', "$dir/unit_tests", @{ $unit->{libs} });
    return $ok;
}

sub build_module {
    my ($log, $asan) = @_;
    if ($asan) {
        my ($ok) = run_logged($log, 1200, { NGINX_BIN => $nginx_bin }, "$src/scripts/asan-build.sh");
        return $ok;
    }
    my ($ok) = run_logged($log, 1200, {}, 'make', '-C', $src, 'module', "NGINX_BIN=$nginx_bin");
    return $ok;
}

# ------------------------------------------------------------------ the tests

# The path of the store server NAME (scripts/store-server.sh, which builds
# it the first time), once per run.
my %server_bin;
sub store_server {
    my ($name) = @_;
    return $server_bin{$name} //= do {
        my $bin = `'$repo/scripts/store-server.sh' '$name'`;
        chomp $bin;
        die "scripts/store-server.sh $name failed\n" if $? || !-x $bin;
        $bin;
    };
}

my @standin = system("perl -MTest::Nginx::Socket -e1 2>/dev/null") == 0 ? () : ('-I', "$src/t/standin");

# t/NNN.t with only blocks @blocks (the file's code before __DATA__ kept):
# a file of the copy's t/, beside the others.
sub selection_file {
    my ($file, @blocks) = @_;
    my %want = map { $_ => 1 } @blocks;
    my ($code, $data) = split /^__DATA__\n/m, slurp("$src/$file"), 2;
    die "$file: no __DATA__\n" unless defined $data;
    my @kept = grep { /^=== TEST (\d+)/ && $want{$1} } split /(?=^=== TEST )/m, $data;
    die "$file: no block " . join(',', @blocks) . "\n" unless @kept == @blocks;
    (my $name = $file) =~ s{^t/}{t/zz-mutant-};
    $name =~ s/\.t$/-@{[ join '-', @blocks ]}.t/;
    spew("$src/$name", $code . "__DATA__\n" . join('', @kept));
    return $name;
}

# Runs one test spec against the copy's build; (passed, timed out).
sub run_spec {
    my ($spec, $log, $asan, $tag) = @_;
    if ($spec =~ /^unit(?::(.+))?$/) {
        return run_logged($log, $test_timeout, {}, "$src/build/mutants-unit/unit_tests",
                          defined $1 ? ("--gtest_filter=$1") : ());
    }
    my ($file, $blocks, $store, $server) = $spec =~ m{^(t/[\w.-]+\.t)(?::([\d,]+))?(?:@(zone|cluster|redis))?(?:%([\w.-]+))?$}
        or die "a test spec that is not t/FILE.t[:N,...][\@store][%server] nor unit[:FILTER]: $spec\n";
    my $run = $blocks ? selection_file($file, split /,/, $blocks) : $file;
    my %env = (TEST_NGINX_BINARY => $nginx_bin, TEST_NGINX_SERVROOT => "$work/servroot",
               TEST_NGINX_MODULE => "$src/build/ngx_http_idempotency_module.so",
               TEST_NGINX_IDEM_STORE => $store // 'redis');
    $env{TEST_REDIS_SERVER} = store_server($server) if defined $server;
    if ($asan) {
        my $rt = `gcc -print-file-name=libasan.so`;
        chomp $rt;
        remove_tree("$work/asan-logs/$tag");
        make_path("$work/asan-logs/$tag");
        %env = (%env, TEST_NGINX_BINARY => "$src/scripts/asan-nginx.sh", ASAN_RUNTIME => $rt,
                NGINX_BIN => $nginx_bin, ASAN_LOG_DIR => "$work/asan-logs/$tag",
                TEST_NGINX_MODULE => "$src/build/asan/ngx_http_idempotency_module.so");
    }
    my @r = run_logged($log, $test_timeout, \%env, 'sh', '-c', "cd '$src' && exec prove @standin $run");
    unlink "$src/$run" if $blocks;
    return @r;
}

# ------------------------------------------------------------------ the run

my $t0 = time;
print "copying the tree into $src\n";
copy_tree();
if (my $bad = check_texts($src)) {
    die "$bad mutations' texts are not found once: fix t/mutants.list first\n";
}
make_path("$work/logs");
remove_tree("$work/servroot");
my $any_unit = grep { grep { /^unit/ } @{ $_->{tests} } } @mutants;
my $any_asan = grep { $_->{asan} } @mutants;

print "building the copy (module" . ($any_unit ? ', unit tests' : '') . ($any_asan ? ', ASan module' : '') . ")\n";
build_module("$work/logs/build.log") or die "the copy does not build: $work/logs/build.log\n";
!$any_unit || build_unit("$work/logs/build.log") or die "the copy's unit tests do not build: $work/logs/build.log\n";
!$any_asan || build_module("$work/logs/build.log", 1) or die "the copy's ASan build failed: $work/logs/build.log\n";

if ($baseline) {
    my %seen;
    for my $m (@mutants) {
        for my $spec (@{ $m->{tests} }) {
            my $key = ($m->{asan} ? 'asan ' : '') . $spec;
            next if $seen{$key}++;
            my $log = "$work/logs/baseline.log";
            my $s0 = time;
            my ($ok, $hung) = run_spec($spec, $log, $m->{asan}, 'baseline');
            printf "baseline %-50s %s (%d s)\n", $key, $ok ? 'passes' : $hung ? 'HANGS' : 'FAILS', time - $s0;
            die "the unmutated copy fails $key: see $log\n" unless $ok;
        }
    }
    exit 0 if $baseline_only;
}

my (@killed, @survived, @stillborn);
my $n = 0;
open my $results, '>', "$work/last-run.txt" or die "$work/last-run.txt: $!\n";
for my $m (@mutants) {
    $n++;
    my $path = "$src/$m->{file}";
    my $original = slurp($path);
    my $log = "$work/logs/$m->{id}.log";
    unlink $log;
    my $mutated = $original;
    my $at = index($mutated, $m->{find});
    substr($mutated, $at, length $m->{find}) = $m->{replace};
    spew($path, $mutated);
    my $s0 = time;
    my $uses_unit = grep { /^unit/ } @{ $m->{tests} };
    my $built = build_module($log, $m->{asan}) && (!$uses_unit || build_unit($log));
    my ($verdict, $by) = ('survived', '');
    if (!$built) {
        $verdict = 'stillborn';
    } else {
        for my $spec (@{ $m->{tests} }) {
            my ($ok, $hung) = run_spec($spec, $log, $m->{asan}, $m->{id});
            next if $ok;
            ($verdict, $by) = ('killed', $spec . ($hung ? ' (no end within ' . $test_timeout . ' s)' : ''));
            last;
        }
    }
    spew($path, $original);
    my $line = sprintf "[%2d/%d] %-9s %-36s %s(%d s)", $n, scalar @mutants, $verdict, $m->{id},
                       $by ne '' ? "by $by " : '', time - $s0;
    print "$line\n";
    print {$results} "$line\n";
    push @{ { killed => \@killed, survived => \@survived, stillborn => \@stillborn }->{$verdict} }, $m;
}
# the copy left as the tree is: its builds match the sources again
build_module("$work/logs/build.log");
build_module("$work/logs/build.log", 1) if $any_asan;

my $judged = @killed + @survived;
my $summary = sprintf "%s: %d mutations, %d killed, %d survived%s: %.1f %% killed (%d min)",
    strftime('%Y-%m-%d', localtime), scalar @mutants, scalar @killed, scalar @survived,
    @stillborn ? ', ' . @stillborn . ' that do not build' : '', $judged ? 100 * @killed / $judged : 0, (time - $t0) / 60;
print "$summary\n";
print {$results} "$summary\n";
print "survived: $_->{id} ($_->{what})\n" for @survived;
print "does not build: $_->{id} (see $work/logs/$_->{id}.log)\n" for @stillborn;
close $results;
exit 2 if @stillborn;
exit($judged && 100 * @killed / $judged < $min_rate ? 1 : 0);
