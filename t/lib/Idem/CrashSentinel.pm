# Idem/CrashSentinel.pm — the crash sentinel: no test passes while an nginx
# process it ran crashed. It reads what nginx and the sanitizers leave
# behind — the error log's `exited on signal` and `[alert]` lines (and a
# sanitizer report that went to stderr), the sanitizer report files
# (asan.PID, ubsan.PID) under ASAN_LOG_DIR, and a master that is gone
# without having been stopped — and fails a Test::More assertion that
# names the block or the gateway and quotes what it found, unless the
# test declared it expected. Core Perl only; does not need Test::Nginx.
#
# Two users, both wired in by the fixture library (no test file calls it):
#
#   - every Test::Nginx file: IdempotencyTest's test_nginx_defaults() calls
#     install(), which adds three Test::Nginx hooks (the stand-in has them
#     too, with the real module's semantics):
#       add_test_cleanup_handler  after each block: the lines nginx wrote
#                                 while it ran (once the master has reaped
#                                 any worker that died), new sanitizer
#                                 reports, an nginx gone without a stop;
#       add_block_preprocessor    before a block with its own --- config,
#                                 which restarts nginx and deletes the logs
#                                 dir: the running nginx is stopped first,
#                                 as Test::Nginx would stop it (QUIT; KILL
#                                 after its timeout), so that its log is
#                                 complete (every worker's exit logged by
#                                 the master), and what was added since
#                                 the last check is the previous block's;
#                                 an nginx that did not remove its pid
#                                 file as it exited crashed;
#       add_cleanup_handler       after the last block: the same stop and
#                                 check (not the stop under
#                                 TEST_NGINX_NO_CLEAN, which keeps nginx).
#     Lines a block names in --- error_log (and, at the stop, in
#     --- shutdown_error_log) are expected: a block that kills a worker on
#     purpose writes `exited on signal 9` there (a crash is expected only
#     by a pattern that names a signal: `[alert]` alone expects alerts, not
#     a dead worker). Patterns as Test::Nginx matches them: a substring, or
#     a regex (eval).
#     Under scripts/asan-suite.sh (ASAN_LOG_DIR set) each test file gets a
#     directory of its own below it (ASAN_LOG_DIR is changed for the nginx
#     processes it starts), so a report is the file's, never that of a
#     file running beside it; asan-suite.sh finds it there all the same.
#
#   - every gateway Idem::Nginx starts: nginx_stop() calls
#     gateway_stopped($ng) once the master has exited (after QUIT the log
#     is complete); a line or report matching the handle's
#     $ng->{log_allowed} (Idem::Nginx::allow_log) is expected.
#
# What is a finding (bad_line, sanitizer_findings): an error log line with
# `exited on signal`, `[alert]`, `==PID==ERROR: ...Sanitizer` or
# `runtime error:`; in a sanitizer file, what scripts/asan-suite.sh counts
# as a report: every ASan/UBSan error and warning, a leak whose allocation
# passes through the module (nginx's own leaks at exit are not), any other
# output but ASan's exit statistics. A sanitizer finding is reported once
# in a test process, by whichever check sees it first (a gateway's stop or
# the block running).
#
# API (nothing is exported):
#   install()                 the Test::Nginx hooks (once; a no-op without
#                             Test::Nginx::Socket loaded)
#   current_block()           the Test::Nginx block running now, or undef
#   bad_line($line)           true for a crash, alert or sanitizer line
#   allowed($line, \@pats)    true when a pattern matches (substring or qr//)
#   expected($line, \@pats)   allowed, by a block's patterns: a crash line
#                             only by one that names a signal
#   log_cursor($file)         a reader of $file's lines from its start
#   new_lines($cursor)        the complete lines added since the last call;
#                             a file that was replaced is read from its start
#   sanitizer_findings($text, [$final])
#                             the reports in one sanitizer file's text (a
#                             line each, with its first frames; their
#                             number in scalar context); unless
#                             $final (its process has exited), what is
#                             still being written is left for a later look
#   without_exit_stats($text) the text but for ASan's exit statistics
#   new_reports($dir, [\%pids], [$final])
#                             findings in $dir's asan.PID / ubsan.PID files
#                             (those of \%pids only) not reported before
#   gateway_stopped($ng, %o)  the check of a stopped Idem::Nginx instance;
#                             o{gone}: masters that had exited before the
#                             stop, o{unclean}: masters that exited leaving
#                             their pid file, o{pids}: all its processes
#                             (whose sanitizer reports are its own)
#   fail_check($what, \@found, $where)
#                             one failing assertion naming $what, quoting
#                             the first lines found; a warning where no
#                             test is running

package Idem::CrashSentinel;

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(basename dirname);
use File::Path qw(make_path);
use File::Spec;
use Time::HiRes qw(time sleep);

use Idem::Proc;
use Idem::Wait;

use constant {
    SETTLE_TIMEOUT => 5,    # seconds for the master to reap (and log) a worker that died
    QUOTED         => 5,    # lines quoted in a failure
};

my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..', '..'));

# ------------------------------------------------------------ what is found

my $BAD_LINE = qr/exited on signal|\[alert\]|==\d+==ERROR: \w*Sanitizer|\bruntime error: /;

sub bad_line { return $_[0] =~ $BAD_LINE }

sub allowed {
    my ($line, $pats) = @_;
    for my $pat (@{ $pats || [] }) {
        next unless defined $pat && length $pat;
        return 1 if ref $pat ? $line =~ $pat : index($line, $pat) >= 0;
    }
    return 0;
}

# A block's --- error_log patterns that a line matches; a crash (`exited on
# signal`) only by a pattern that names one: `[alert]` there expects an
# alert, not that any worker may die.
sub expected {
    my ($line, $pats) = @_;
    return allowed($line, $line =~ /exited on signal/ ? [ grep { "$_" =~ /exited on signal|signal/ } @$pats ] : $pats);
}

sub log_cursor { return { file => $_[0], pos => 0, id => undef } }

# The next read starts at the beginning of whatever file is there then.
sub rewind { @{ $_[0] }{qw(pos id)} = (0, undef) }

sub new_lines {
    my ($c) = @_;
    open my $fh, '<:raw', $c->{file} or return ();
    my @st = stat $fh;
    my $id = "$st[0]:$st[1]";
    rewind($c) if defined $c->{id} && ($c->{id} ne $id || $st[7] < $c->{pos});
    $c->{id} = $id;
    seek $fh, $c->{pos}, 0;
    my @lines;
    while (defined(my $line = <$fh>)) {
        last unless $line =~ /\n\z/;    # still being written: read next time
        $c->{pos} += length $line;
        chomp $line;
        push @lines, $line;
    }
    return @lines;
}

# A module frame in a leak's allocation stack: the leak is the module's.
sub module_leak {
    my ($leaks) = @_;
    for my $leak (split /\n(?=(?:Direct|Indirect) leak of )/, $leaks) {
        return $leak if $leak =~ m{ngx_http_idempotency_module|\Q$REPO\E/module/};
    }
    return;
}

# First line and up to three frames of the report starting at $text's $at.
sub excerpt {
    my ($text, $at) = @_;
    my @lines = split /\n/, substr($text, $at), 12;
    my @frames = grep { /^\s+#[0-9] / } @lines[1 .. $#lines];
    s/^\s+// for @frames;
    return join ' | ', $lines[0], @frames[0 .. ($#frames < 2 ? $#frames : 2)];
}

sub without_exit_stats {
    my ($text) = @_;
    $text =~ s/^AddressSanitizer exit stats:\n.*?^Global quarantine stats:[^\n]*\n//msg;
    return $text;
}

sub sanitizer_findings {
    my ($text, $final) = @_;
    # ASan's exit statistics (atexit=1) are not a report.
    $text = without_exit_stats($text);
    if ($final) {
        $text .= "\n" if $text =~ /[^\n]\z/;
    } else {
        # still being written: read again when complete
        $text =~ s/[^\n]+\z//;
        $text =~ s/^AddressSanitizer exit stats:\n.*\z//ms;
    }
    my @leaks;
    while ($text =~ s/^=+\n==\d+==ERROR: LeakSanitizer: detected memory leaks\n(.*?)^SUMMARY: AddressSanitizer: (\d+ byte\(s\) leaked[^\n]*)\n//ms) {
        my ($leaks, $summary) = ($1, $2);
        my $leak = module_leak($leaks) // next;
        my ($first) = $leak =~ /\A([^\n]*?):?\n/;
        my ($frame) = $leak =~ m{^\s+(#\d+ 0x[0-9a-f]+ in \S+ \S*(?:ngx_http_idempotency_module|\Q$REPO\E/module/)\S*)}m;
        push @leaks, "LeakSanitizer: $first, through the module" . ($frame ? " ($frame)" : '') . "; $summary";
    }
    $text =~ s/^=+\n==\d+==ERROR: LeakSanitizer: detected memory leaks\n.*\z//ms unless $final;    # unfinished
    my @found;
    while ($text =~ /^(?:==\d+==(?:ERROR|WARNING)\b|[^\n]*\bruntime error: )/mg) {
        push @found, excerpt($text, $-[0]);
    }
    if (!@found && $text =~ /^([^\n]*\S[^\n]*)$/m) {
        push @found, "sanitizer output: $1";
    }
    return wantarray ? (@found, @leaks) : @found + @leaks;
}

my %reported;    # a sanitizer file => how many of its findings were reported
my %size;        # a sanitizer file => its size when last read

sub new_reports {
    my ($dir, $pids, $final) = @_;
    my $dh;
    return () unless defined $dir && opendir $dh, $dir;
    my @new;
    for my $name (sort grep { /^(?:asan|ubsan)\.\d+$/ } readdir $dh) {
        my ($pid) = $name =~ /(\d+)$/;
        next if $pids && !$pids->{$pid};
        my $path = "$dir/$name";
        my $size = -s $path // 0;
        next if $size == ($size{$path} // -1);
        open my $fh, '<:raw', $path or next;
        my $text = do { local $/; <$fh> } // '';
        $size{$path} = length $text;
        my @found = sanitizer_findings($text, $final);
        my $seen = $reported{$path} // 0;
        next unless @found > $seen;
        $reported{$path} = @found;
        push @new, map { "$name: $_" } @found[$seen .. $#found];
    }
    closedir $dh;
    return @new;
}

# ------------------------------------------------------------ reporting

sub fail_check {
    my ($what, $found, $where) = @_;
    my @quoted = @$found[0 .. ($#$found < QUOTED - 1 ? $#$found : QUOTED - 1)];
    my $more = @$found > @quoted ? '  (and ' . (@$found - @quoted) . " more)\n" : '';
    my $text = "the crash sentinel found, $where:\n" . join('', map { "  $_\n" } @quoted) . $more;
    if (!$INC{'Test/Builder.pm'}) {
        warn "$what: $text";
        return;
    }
    my $tb = Test::Builder->new;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    (my $first = $found->[0]) =~ s/\s+/ /g;
    $tb->ok(0, "$what - crash sentinel: $first" . (@$found > 1 ? ' (and ' . (@$found - 1) . ' more)' : ''));
    $tb->diag($text);
}

# ------------------------------------------------------------ Test::Nginx

my %tn = (
    installed => 0,
    cursor    => undef,    # over Test::Nginx's error.log
    nginx     => undef,    # the pid of the nginx the blocks run on, once seen
    gone      => {},       # nginx pids already reported gone
    last      => undef,    # the last block that ran
    current   => undef,    # the block between the preprocessor and its cleanup
    checked   => undef,    # the block the last check was charged to
    ended     => 0,
    asan_dir  => undef,    # this file's sanitizer reports
);

sub current_block { $tn{current} }

sub install {
    return 1 if $tn{installed};
    my $socket = 'Test::Nginx::Socket';
    my $add_pre = $socket->can('add_block_preprocessor') or return 0;
    my $add_test_cleanup = $socket->can('add_test_cleanup_handler')
        or die "Idem::CrashSentinel: this Test::Nginx::Socket has no add_test_cleanup_handler\n";
    my $add_cleanup = $socket->can('add_cleanup_handler')
        or die "Idem::CrashSentinel: this Test::Nginx::Socket has no add_cleanup_handler\n";
    $tn{installed} = 1;
    $tn{cursor} = log_cursor(util('ErrLogFile'));
    if (my $logs = $ENV{ASAN_LOG_DIR}) {
        (my $file = basename($0)) =~ s/\.t\z//;
        $tn{asan_dir} = "$logs/$file.$$";
        make_path($tn{asan_dir});
        chmod((stat $logs)[2] & 07777, $tn{asan_dir});
        $ENV{ASAN_LOG_DIR} = $tn{asan_dir};
    }
    $add_pre->(\&before_block);
    $add_test_cleanup->(\&after_block);
    $add_cleanup->(\&at_end);
    return 1;
}

# Test::Nginx::Util's settings and subs, by name (the real module keeps them
# there, the stand-in aliases them there).
sub util {
    my ($name) = @_;
    no strict 'refs';
    return ${"Test::Nginx::Util::$name"};
}

sub nginx_pid {
    my $file = util('PidFile');
    open my $fh, '<', $file or return;
    my ($pid) = (<$fh> // '') =~ /^(\d+)/;
    return $pid;
}

# Every worker that died has been reaped, so its exit is in the log: the
# master logs it as it reaps it.
sub settle {
    my ($master) = @_;
    Idem::Wait::wait_until(sub { !zombie_children($master) }, SETTLE_TIMEOUT);
}

sub zombie_children {
    my ($pid) = @_;
    opendir my $dh, '/proc' or return 0;
    my $n = 0;
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my ($state, $ppid) = Idem::Proc::proc_stat($p);
        $n++ if defined $ppid && $ppid == $pid && $state eq 'Z';
    }
    return $n;
}

sub block_patterns {
    my ($block, $at_stop) = @_;
    my @pats;
    for my $section ('error_log', $at_stop ? 'shutdown_error_log' : ()) {
        my $value = $block->$section;
        next unless defined $value;
        push @pats, !ref $value ? (split /\n+/, $value) : ref $value eq 'ARRAY' ? @$value : ($value);
    }
    return \@pats;
}

# What nginx left since the last check, charged to $block. o{stopped}:
# nginx was just stopped (what that found: o{found}); o{at_stop}: lines
# the block names in --- shutdown_error_log are expected too.
sub check_block {
    my ($block, $where, %o) = @_;
    my @found = @{ $o{found} || [] };
    my $pid = nginx_pid();
    if (defined $pid && (!defined $tn{nginx} || $pid != $tn{nginx})) {
        # another nginx than the one read so far: its log is a new file
        rewind($tn{cursor}) if defined $tn{nginx};
        $tn{nginx} = $pid;
    }
    if (defined $pid && !$o{stopped} && !$tn{gone}{$pid}) {
        if (!Idem::Proc::running($pid)) {
            $tn{gone}{$pid} = 1;
            push @found, "nginx (pid $pid) is gone but nobody stopped it: it crashed or was killed "
                       . '(its pid file is still there)';
        } else {
            settle($pid);
        }
    }
    my $pats = block_patterns($block, $o{at_stop});
    push @found, grep { bad_line($_) && !expected($_, $pats) } new_lines($tn{cursor});
    if (my @reports = new_reports($tn{asan_dir})) {
        push @found, @reports;
        $where .= " (sanitizer reports in $tn{asan_dir})";
    }
    # A block that kept the nginx of the block checked before it: what was
    # written since that check may be that block's, logged late.
    my $before = $tn{checked};
    $tn{checked} = $block;
    if ($before && $before != $block && !defined $block->config) {
        my ($test) = $before->name =~ /\b(TEST \d+)/;
        $where .= ' (written since the check after ' . ($test // $before->name) . ', on the same nginx)';
    }
    fail_check($block->name, \@found, $where) if @found;
}

# Stops the nginx the blocks ran on, as Test::Nginx does before it starts
# the next one (QUIT; after its timeout, KILL), then checks the complete
# log. An nginx that exits cleanly removes its pid file: one left behind
# is an nginx that crashed (or had been killed).
sub stop_and_check {
    my ($block, $where) = @_;
    my $pid = nginx_pid();
    my @found;
    if (defined $pid && !$tn{gone}{$pid}) {
        my $timeout = util('Timeout') || 3;
        if (!Idem::Proc::running($pid)) {
            push @found, "nginx (pid $pid) was gone before it was stopped: it crashed or was killed "
                       . '(its pid file is still there)';
        } else {
            kill 'QUIT', $pid;
            if (!Idem::Wait::wait_until(sub { !Idem::Proc::running($pid) }, $timeout)) {
                if (getpgrp($pid) == $pid) { kill 'KILL', -$pid } else { kill 'KILL', $pid }
                Idem::Wait::wait_until(sub { !Idem::Proc::running($pid) }, SETTLE_TIMEOUT);
                warn "WARNING: " . $block->name . " - nginx (pid $pid) did not exit within $timeout s of QUIT "
                   . "and was killed: the crash sentinel read its log as it was then\n";
            } elsif (defined(my $left = nginx_pid())) {
                push @found, "nginx (pid $pid) exited after QUIT without removing its pid file: it crashed"
                    if $left == $pid;
            }
        }
    }
    check_block($block, $where, stopped => 1, at_stop => 1, found => \@found);
    rewind($tn{cursor});    # the next nginx writes a new log
    @tn{qw(nginx checked)} = ();
}

# Whether Test::Nginx surely restarts nginx for this block (so deletes its
# log): a block with its own config, and none of what keeps the running one.
sub restarts {
    my ($block) = @_;
    return 0 unless defined $block->config;
    return 0 if util('NoNginxManager') || util('UseHup') || !(util('ForceRestartOnTest') // 1);
    for my $section (qw(skip_eval skip_nginx skip_nginx2 skip_openssl skip_slave)) {
        return 0 if defined $block->$section;
    }
    return 1;
}

sub before_block {
    my ($block) = @_;
    my $last = $tn{last};
    $tn{current} = $block;
    return unless $last && defined $block->config;
    if (restarts($block)) {
        stop_and_check($last, 'when nginx was stopped after this block');
    } else {
        # Test::Nginx may restart nginx: read what is there while it is
        check_block($last, 'before the next block');
    }
}

sub after_block {
    my ($block) = @_;
    undef $tn{current};
    return if defined $block->SKIP;
    $tn{last} = $block;
    check_block($block, 'at the end of this block');
}

sub at_end {
    return if $tn{ended}++;
    my $block = $tn{current} // $tn{last} // return;
    if ($ENV{TEST_NGINX_NO_CLEAN}) {
        check_block($block, 'at the end of the file');
    } else {
        stop_and_check($block, 'when nginx was stopped at the end of the file');
    }
}

# ------------------------------------------------------------ Idem::Nginx

sub gateway_stopped {
    my ($ng, %o) = @_;
    my $allowed = $ng->{log_allowed} ? [ $ng->{log_allowed} ] : [];
    $ng->{sentinel} //= log_cursor($ng->{error_log});
    my @lines = new_lines($ng->{sentinel});
    my @found;
    push @found, map { "master process $_ had exited before the stop: it crashed or was killed" } @{ $o{gone} || [] };
    push @found, map { "master process $_ exited after QUIT without removing its pid file: it crashed" }
                 @{ $o{unclean} || [] };
    push @found, grep { bad_line($_) } @lines;
    my $where = "when it was stopped (error log $ng->{error_log}";
    if (my $dir = $ng->{asan_dir}) {
        # this gateway's processes: its masters and every worker they started
        my %pids = map { $_ => 1 } @{ $o{pids} || [] };
        my @reports = new_reports($dir, \%pids, 1);    # they have all exited
        push @found, @reports;
        $where .= "; sanitizer reports in $dir" if @reports;
    }
    @found = grep { !allowed($_, $allowed) } @found;
    $ng->{crashes} = \@found;
    return unless @found;
    my $block = current_block();
    local $Test::Builder::Level = ($Test::Builder::Level // 1) + 2;    # the caller of nginx_stop
    fail_check(($block ? $block->name . ' - ' : '') . "nginx $ng->{name} (Idem::Nginx)", \@found, "$where)");
}

1;
