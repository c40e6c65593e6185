# Idem/Proc.pm — the processes a test run starts: its temp dir, spawning,
# stopping by pid, a watchdog for a run that dies, and cleanup at exit.
# Core Perl only; does not need Test::Nginx.
#
#     use lib 't/lib';
#     use Idem::Proc;
#     my $dir = Idem::Proc::tmpdir();             # created on first use
#     my $pid = Idem::Proc::spawn("$dir/x.log", 'redis-server', '--port', 7000);
#     Idem::Proc::stop_pid($pid);                 # TERM, KILL after 5 s
#
# API (nothing is exported; call them by their full name):
#   init(%o)               once per process (later calls return at once):
#                          makes the temp dir (o{prefix}, default
#                          "idempotency-test"; mode 0755: nginx workers may
#                          run as another user), installs INT/TERM/HUP
#                          handlers that clean up, and starts the watchdog.
#                          Returns the temp dir.
#   tmpdir()               the temp dir (init() first if needed)
#   keep($bool)            keep the temp dir at cleanup (for a look at logs)
#   spawn($log, @cmd)      fork + exec @cmd, stdin /dev/null, stdout and
#                          stderr appended to $log; returns the pid, stopped
#                          at cleanup unless stopped before
#   track($pid)            a child forked by the caller (a helper loop): as
#                          spawn's, stopped at cleanup
#   adopt($pid)            a process that is not our child (a daemonized
#                          nginx master): stopped at cleanup, watched
#   running($pid)          true while it runs; reaps our children, and a
#                          zombie counts as gone
#   exit_status($pid)      the wait status of a child seen exiting, or undef
#   wait_gone($pid, $secs) waits until it is gone; true if it is
#   stop_pid($pid, [$signal], [$secs])
#                          CONT (a paused process must act on the signal),
#                          $signal (default TERM), waits $secs (default 5),
#                          then KILL; forgets the pid
#   forget($pid)           not stopped at cleanup any more
#   on_cleanup($code)      runs at cleanup before the pids are stopped
#                          (last registered first)
#   cleanup()              what END and the signal handlers run
#   owner()                true in the process that called init()
#   log_tail($file, [$n])  the last $n (10) lines of a log
#   proc_stat($pid)        (state, ppid) from /proc
#   cmdline($pid)          its command line, words joined by spaces
#   children_of($pid, [$re])
#                          its live children (command line matching $re)
#   vm_rss_kb($pid)        its VmRSS in kB
#
# The watchdog is a forked process holding a pipe only we write to: if we
# die without cleaning up (SIGKILL), it sees EOF, stops every pid we told it
# about and removes the temp dir.

package Idem::Proc;

use strict;
use warnings;

use File::Path qw(remove_tree);
use File::Spec;
use File::Temp qw(tempdir);
use IO::Handle;
use POSIX qw(WNOHANG _exit);
use Time::HiRes qw(time sleep);

use constant STOP_TIMEOUT => 5;    # seconds between the signal and KILL

my ($owner_pid, $tmpdir, $keep);
my ($watchdog_pid, $watchdog_fh);
my (%child, %exit, @owned, @hooks);

sub owner { return $owner_pid && $owner_pid == $$ }

sub init {
    my (%o) = @_;
    return $tmpdir if owner();
    $owner_pid = $$;
    $tmpdir = tempdir(($o{prefix} // 'idempotency-test') . '-XXXXXX', TMPDIR => 1);
    chmod 0755, $tmpdir;
    install_signal_handlers();
    start_watchdog();
    return $tmpdir;
}

sub tmpdir { return owner() ? $tmpdir : init() }
sub keep   { $keep = $_[0] }

# fork + exec @cmd with stdout/stderr appended to $log; returns the pid.
sub spawn {
    my ($log, @cmd) = @_;
    init() unless owner();
    my $pid = fork;
    die "Idem::Proc: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP PIPE ALRM);
        open STDIN, '<', File::Spec->devnull;
        open STDOUT, '>>', $log or _exit(127);
        open STDERR, '>&', \*STDOUT or _exit(127);
        exec { $cmd[0] } @cmd or do {
            print STDERR "Idem::Proc: exec $cmd[0]: $!\n";
            _exit(127);
        };
    }
    track($pid);
    return $pid;
}

sub track {
    my ($pid) = @_;
    init() unless owner();
    $child{$pid} = 1;
    push @owned, $pid;
    tell_watchdog("pid $pid");
    return $pid;
}

sub adopt {
    my ($pid) = @_;
    init() unless owner();
    push @owned, $pid;
    tell_watchdog("pid $pid");
    return $pid;
}

sub forget {
    my ($pid) = @_;
    @owned = grep { $_ != $pid } @owned;
    tell_watchdog("forget $pid");
}

sub running {
    my ($pid) = @_;
    return 0 unless $pid;
    return 0 if exists $exit{$pid};
    if ($child{$pid}) {
        my $r = waitpid($pid, WNOHANG);
        return 1 if $r == 0;
        $exit{$pid} = $r == $pid ? $? : undef;
        delete $child{$pid};
        return 0;
    }
    return 0 unless kill 0, $pid;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    return (<$fh> // '') =~ /\)\s+[ZX]\s/ ? 0 : 1;
}

sub exit_status { return $exit{ $_[0] } }

sub wait_gone {
    my ($pid, $secs) = @_;
    my $deadline = time + $secs;
    sleep 0.02 while running($pid) && time < $deadline;    # a poll of the condition, bounded
    return !running($pid);
}

sub stop_pid {
    my ($pid, $signal, $timeout) = @_;
    return 1 unless $pid;
    forget($pid);
    if (running($pid)) {
        kill 'CONT', $pid;
        kill $signal // 'TERM', $pid;
        if (!wait_gone($pid, $timeout // STOP_TIMEOUT)) {
            kill 'KILL', $pid;
            wait_gone($pid, 5);
        }
    }
    return 1;
}

sub on_cleanup { push @hooks, $_[0] }

# ---------------------------------------------------------------- /proc

sub log_tail {
    my ($file, $n) = @_;
    $n //= 10;
    open my $fh, '<', $file or return '';
    my @lines = <$fh>;
    return join '', @lines > $n ? @lines[-$n .. -1] : @lines;
}

sub proc_stat {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return;
    my $stat = <$fh> // return;
    my ($rest) = $stat =~ /\)\s+(.*)$/s or return;
    my @f = split ' ', $rest;
    return ($f[0], $f[1]);
}

sub cmdline {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return '';
    local $/;
    my $c = <$fh> // '';
    $c =~ s/\0+/ /g;
    $c =~ s/\s+$//;
    return $c;
}

sub children_of {
    my ($pid, $re) = @_;
    my @kids;
    opendir my $dh, '/proc' or return;
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my ($state, $ppid) = proc_stat($p);
        next unless defined $ppid && $ppid == $pid && $state ne 'Z';
        next if defined $re && cmdline($p) !~ $re;
        push @kids, $p + 0;
    }
    closedir $dh;
    @kids = sort { $a <=> $b } @kids;
    return wantarray ? @kids : scalar @kids;
}

sub vm_rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)\s+kB/ }
    return;
}

# ---------------------------------------------------------------- watchdog

sub start_watchdog {
    pipe(my $reader, my $writer) or die "Idem::Proc: pipe: $!\n";
    my $pid = fork;
    die "Idem::Proc: fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        close $writer;
        $0 = 'IdempotencyTest watchdog';
        $SIG{$_} = 'IGNORE' for qw(INT HUP);
        $SIG{$_} = 'DEFAULT' for qw(TERM ALRM);
        alarm 0;
        my %pids;
        while (defined(my $line = <$reader>)) {
            if    ($line =~ /^pid (\d+)/)    { $pids{$1} = 1 }
            elsif ($line =~ /^forget (\d+)/) { delete $pids{$1} }
            elsif ($line =~ /^quit/)         { _exit(0) }
        }
        # EOF without "quit": our creator is gone. They are not our
        # children, so we cannot reap them; a zombie counts as gone.
        my $running = sub {
            my ($p) = @_;
            return 0 unless kill 0, $p;
            open my $fh, '<', "/proc/$p/stat" or return 1;
            return (<$fh> // '') !~ /\) Z /;
        };
        my @pids = keys %pids;
        kill 'TERM', @pids if @pids;
        my $deadline = time + STOP_TIMEOUT;
        while (time < $deadline && grep { $running->($_) } @pids) { sleep 0.05 }
        @pids = grep { $running->($_) } @pids;
        kill 'KILL', @pids if @pids;
        remove_tree($tmpdir) if defined $tmpdir;
        _exit(0);
    }
    close $reader;
    $writer->autoflush(1);
    ($watchdog_pid, $watchdog_fh) = ($pid, $writer);
}

sub tell_watchdog {
    my ($msg) = @_;
    return unless $watchdog_fh && owner();
    local $SIG{PIPE} = 'IGNORE';
    print {$watchdog_fh} "$msg\n";
}

# ---------------------------------------------------------------- cleanup

my $cleaned = 0;

sub cleanup {
    return if $cleaned || !owner();
    $cleaned = 1;
    local ($?, $!, $@);
    # Retire the watchdog first so it never signals pids we have reaped.
    if ($watchdog_pid) {
        tell_watchdog('quit');
        close $watchdog_fh;
        my $deadline = time + STOP_TIMEOUT;
        sleep 0.01 while waitpid($watchdog_pid, WNOHANG) == 0 && time < $deadline;
        if (kill 0, $watchdog_pid) { kill 'KILL', $watchdog_pid; waitpid($watchdog_pid, 0) }
        $watchdog_pid = $watchdog_fh = undef;
    }
    eval { $_->() } for reverse @hooks;
    my @pids = reverse @owned;
    eval { stop_pid($_) } for @pids;
    return unless defined $tmpdir && -d $tmpdir;
    if ($keep) { print STDERR "# temp dir kept: $tmpdir\n" }
    else { remove_tree($tmpdir) }
}

sub install_signal_handlers {
    my %signo = (INT => 2, HUP => 1, TERM => 15);
    for my $sig (keys %signo) {
        my $previous = $SIG{$sig};
        $SIG{$sig} = sub {
            if (!owner()) {                          # a forked copy of us
                $SIG{$sig} = 'DEFAULT';
                kill $sig, $$;
                return;
            }
            cleanup();
            $previous->(@_) if ref $previous eq 'CODE';
            exit(128 + $signo{$sig});                # runs other END blocks
        };
    }
}

END { cleanup() }

1;
