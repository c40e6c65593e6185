package Test::Nginx::Socket;

# A small, self-contained stand-in for OpenResty's Test::Nginx::Socket
# (CPAN distribution Test-Nginx), used only when the real module is not
# installed:
#
#     prove -I t/standin -r t
#
# It implements the subset of the real module that this project's t/*.t
# files use, following the real module's semantics (request building,
# response parsing, which checks are run and how many subtests each one
# counts, nginx.conf generation, the error log window, ...).  It only
# needs core Perl modules.  See the notes at the end of this file for
# what is intentionally left out.

use strict;
use warnings;

our $VERSION = '0.29_standin';

use Test::More ();
use Test::Builder ();
use Exporter ();
use Carp qw( croak carp cluck confess );
use Cwd ();
use File::Spec ();
use File::Path qw( make_path remove_tree );
use IO::Select ();
use IO::Socket::INET ();
use POSIX qw( SIGQUIT SIGKILL SIGTERM WNOHANG );
use Scalar::Util qw( looks_like_number );
use List::Util qw( shuffle min );
use Time::HiRes qw( sleep time );

use Test::Nginx::StandIn::Block ();

sub run_test ($);
sub trim ($);
sub fmt_str ($);
sub parse_time ($);
sub expand_env_in_text ($$$);
sub parse_headers ($);
sub _value_contains ($$);
sub _pattern_list ($);
sub _line_matches ($$);
sub get_indexed_value ($$$$);
sub send_request ($$$$;$);

# ----------------------------------------------------------------------
# Exports
# ----------------------------------------------------------------------

# What the real Test::Nginx::Socket exports (its own list) ...
our @EXPORT = qw(
    env_to_nginx is_str plan run_tests run_test
    repeat_each config_preamble worker_connections
    master_process_enabled
    no_long_string workers master_on master_off
    log_level no_shuffle no_root_location use_hup
    server_name
    server_addr server_root html_dir server_port server_port_for_client
    timeout no_nginx_manager check_accum_error_log
    add_block_preprocessor bail_out add_test_cleanup_handler
    add_cleanup_handler add_response_body_check
);

# ... plus what it inherits from Test::Base (the Test::More subset and
# the block functions), plus done_testing for convenience.
our @EXPORT_FROM_TEST_MORE = qw(
    ok isnt like unlike is_deeply cmp_ok
    skip todo_skip pass fail
    eq_array eq_hash eq_set
    can_ok isa_ok diag use_ok
    $TODO
);

push @EXPORT, @EXPORT_FROM_TEST_MORE, qw(
    is no_diff blocks next_block first_block
    croak carp cluck confess
    done_testing
);

{
    no strict 'refs';
    no warnings 'once';
    for my $sym (@EXPORT_FROM_TEST_MORE) {
        next if $sym =~ /^\$/;
        *{"Test::Nginx::Socket::$sym"} = \&{"Test::More::$sym"};
    }
    *Test::Nginx::Socket::TODO = \$Test::More::TODO;
    *Test::Nginx::Socket::plan = \&Test::More::plan;
}

# Test::Base's import: enables strict and warnings in the test script,
# passes plan arguments ('no_plan', tests => N, skip_all => ...) on to
# Test::More, supports "use Test::Nginx::Socket -Base" in helper modules.
sub import {
    my $class = shift;
    my @args = @_;

    my $caller = caller;

    my $base = grep { defined $_ && /^-base$/i } @args;
    @args = grep { !(defined $_ && /^-base$/i) } @args;

    # drop "-package => name" pairs, as Test::Base does
    my @plan_args;
    for (my $i = 0; $i < @args; $i++) {
        if (defined $args[$i] && $args[$i] eq '-package') {
            $i++;
            next;
        }
        push @plan_args, $args[$i];
    }

    strict->import;
    warnings->import;

    if ($base) {
        no strict 'refs';
        push @{"${caller}::ISA"}, $class
            if !$caller->isa($class);
    }

    if (@plan_args && !$base) {
        Test::More::plan(@plan_args);
    }

    # export our functions plus those of any subclass in between
    my @classes;
    {
        no strict 'refs';
        my @todo = ($class);
        my %seen;
        while (my $c = shift @todo) {
            next if $seen{$c}++;
            push @classes, $c if $c->isa(__PACKAGE__);
            push @todo, @{"${c}::ISA"};
        }
    }

    for my $c (@classes) {
        no strict 'refs';
        my @syms = grep {
            my $s = $_;
            $s =~ /^\$/ || !defined &{"${caller}::$s"};
        } @{"${c}::EXPORT"};
        next if !@syms;
        local $Exporter::ExportLevel = 0;
        Exporter::export($c, $caller, @syms);
    }
}

# ----------------------------------------------------------------------
# Settings (the real Test::Nginx::Util globals)
# ----------------------------------------------------------------------

our $Verbose = $ENV{TEST_NGINX_VERBOSE};
our $NoNginxManager = $ENV{TEST_NGINX_NO_NGINX_MANAGER} || 0;
our $RepeatEach = 1;
our $LoadModules = $ENV{TEST_NGINX_LOAD_MODULES};
our $NoShuffle = $ENV{TEST_NGINX_NO_SHUFFLE} || 0;
our $Timeout = $ENV{TEST_NGINX_TIMEOUT} || 3;
our $CheckAccumErrLog = $ENV{TEST_NGINX_CHECK_ACCUM_ERR_LOG};
our $ServerAddr = '127.0.0.1';
our $ServerName = 'localhost';
our $WorkerUser = $ENV{TEST_NGINX_WORKER_USER};
if (defined $WorkerUser && $WorkerUser !~ /^\w+(?:\s+\w+)?$/) {
    die "Bad value in the env TEST_NGINX_WORKER_USER: $WorkerUser\n";
}

our $NginxBinary          = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $Workers              = 1;
our $WorkerConnections    = 64;
our $LogLevel             = $ENV{TEST_NGINX_LOG_LEVEL} || 'debug';
our $MasterProcessEnabled = $ENV{TEST_NGINX_MASTER_PROCESS} || 'off';
our $DaemonEnabled        = 'on';
our $ServerPort           = $ENV{TEST_NGINX_SERVER_PORT}
                            || $ENV{TEST_NGINX_PORT} || 1984;
our $ServerPortForClient  = $ENV{TEST_NGINX_CLIENT_PORT}
                            || $ServerPort || 1984;
our $NoRootLocation       = 0;
our $TestNginxSleep       = $ENV{TEST_NGINX_SLEEP} || 0.015;
our $ForceRestartOnTest   = defined $ENV{TEST_NGINX_FORCE_RESTART_ON_TEST}
                            ? $ENV{TEST_NGINX_FORCE_RESTART_ON_TEST} : 1;
our $EventType            = $ENV{TEST_NGINX_EVENT_TYPE};
our $ReusePort            = $ENV{TEST_NGINX_REUSE_PORT};

# Stand-in only: an optional address for the generated "listen" directive
# (the real module always emits "listen <port>", i.e. all addresses).
our $ListenAddr = $ENV{TEST_NGINX_STANDIN_LISTEN_ADDR};

our $NoLongString;
our $ConfigPreamble = '';
our @EnvToNginx;
our @BlockPreprocessors;
our @CleanupHandlers;
our @TestCleanupHandlers;
our @ResponseBodyChecks;
our $FirstTime = 1;
our $PrevConfig;
our $PrevBlock;
our $NginxStartFailed;    # stand-in: the block whose nginx did not start
our $ErrLogFilePos = 0;
our $TotalConnectingTimeouts = 0;
our $NginxVersion;
our $NginxRawVersion;
our $OpenSSLVersion;
our $NginxConfigureArgs = '';
our $LatestNginxVersion = 0.008039;
our $InSubprocess;

srand $$;

our $ServRoot = $ENV{TEST_NGINX_SERVROOT}
                || File::Spec->rel2abs('t/servroot');
$ENV{TEST_NGINX_SERVER_ROOT} = $ServRoot;

our $LogDir     = File::Spec->catfile($ServRoot, 'logs');
our $ErrLogFile = File::Spec->catfile($LogDir, 'error.log');
our $AccLogFile = File::Spec->catfile($LogDir, 'access.log');
our $HtmlDir    = File::Spec->catfile($ServRoot, 'html');
our $ConfDir    = File::Spec->catfile($ServRoot, 'conf');
our $ConfFile   = File::Spec->catfile($ConfDir, 'nginx.conf');
our $PidFile    = File::Spec->catfile($LogDir, 'nginx.pid');

# The real module keeps these in Test::Nginx::Util; alias them there so
# scripts using the fully qualified names keep working.
{
    no strict 'refs';
    for my $var (qw( ServerPort ServerPortForClient ServerAddr ServerName
                     RepeatEach NoLongString ServRoot ConfFile PidFile
                     NginxVersion NginxBinary LogLevel ErrLogFile
                     AccLogFile HtmlDir Timeout NoNginxManager
                     CheckAccumErrLog Verbose ForceRestartOnTest ))
    {
        *{"Test::Nginx::Util::$var"} = \${"Test::Nginx::Socket::$var"};
    }

    # ... and these functions (the ones of its export list we implement),
    # which a block's Perl code can call unqualified (see block_eval).
    for my $sub (qw( expand_env_in_text env_to_nginx is_str
                     check_accum_error_log is_running no_long_string
                     server_addr server_name parse_time verbose sleep_time
                     bail_out add_cleanup_handler add_test_cleanup_handler
                     cleanup_test access_log_data
                     error_log_data setup_server_root write_config_file
                     get_canon_version get_nginx_version trim parse_headers
                     run_tests get_pid_from_pidfile add_block_preprocessor
                     timeout worker_connections workers master_on master_off
                     config_preamble repeat_each master_process_enabled
                     log_level no_shuffle no_root_location html_dir
                     server_root server_port server_port_for_client
                     no_nginx_manager use_hup ))
    {
        *{"Test::Nginx::Util::$sub"} = \&{"Test::Nginx::Socket::$sub"};
    }
}

# A block's Perl code (--- init, --- skip_eval) is evaluated as the real
# module does it, in its Test::Nginx::Util::run_test: a string eval in
# package Test::Nginx::Util, under strict, where $block and $name are the
# block and its name. So "our $x" in an init is $Test::Nginx::Util::x, not
# a variable of this package: state a block hands to a later one must be
# named in full (e.g. $main::x), as it must with the real module.
# Returns the value (scalar context) and the error ('' if none).
package Test::Nginx::Util {
    sub block_eval {
        my ($block, $code) = @_;
        my $name = $block->name;
        my $value = eval $code;
        return ($value, $@);
    }
}

# ----------------------------------------------------------------------
# Configuration functions
# ----------------------------------------------------------------------

sub repeat_each (@) {
    if (@_) {
        $RepeatEach = shift;
    }
    return $RepeatEach;
}

sub worker_connections (@) {
    if (@_) {
        $WorkerConnections = shift;
    } else {
        return $WorkerConnections;
    }
}

sub workers (@) {
    if (@_) {
        $Workers = shift;
    } else {
        return $Workers;
    }
}

sub log_level (@) {
    if (@_) {
        $LogLevel = shift;
    } else {
        return $LogLevel;
    }
}

sub master_on () {
    $MasterProcessEnabled = 'on';
}

sub master_off () {
    $MasterProcessEnabled = 'off';
}

sub master_process_enabled (@) {
    if (@_) {
        $MasterProcessEnabled = shift() ? 'on' : 'off';
    } else {
        return $MasterProcessEnabled;
    }
}

sub no_shuffle () {
    $NoShuffle = 1;
}

sub no_root_location () {
    $NoRootLocation = 1;
}

sub no_long_string () {
    $NoLongString = 1;
}

sub no_diff {
    $ENV{TEST_SHOW_NO_DIFFS} = 1;
}

sub no_nginx_manager () {
    $NoNginxManager = 1;
}

sub use_hup () {
    warn "WARNING: use_hup() (the HUP reload mode) is not supported by the "
         . "Test::Nginx::Socket stand-in; ignored\n";
}

sub check_accum_error_log () {
    $CheckAccumErrLog = 1;
}

sub config_preamble ($) {
    $ConfigPreamble = shift;
}

sub timeout (@) {
    if (@_) {
        $Timeout = shift;
    } else {
        return $Timeout;
    }
}

sub server_addr (@) {
    if (@_) {
        $ServerAddr = shift;
    } else {
        return $ServerAddr;
    }
}

sub server_name (@) {
    if (@_) {
        $ServerName = shift;
    } else {
        return $ServerName;
    }
}

sub server_port (@) {
    if (@_) {
        $ServerPort = shift;
    } else {
        return $ServerPort;
    }
}

sub server_port_for_client (@) {
    if (@_) {
        $ServerPortForClient = shift;
    } else {
        return $ServerPortForClient;
    }
}

sub html_dir () { return $HtmlDir }

sub server_root () { return $ServRoot }

sub sleep_time { return $TestNginxSleep }

sub verbose { return $Verbose }

sub env_to_nginx (@) {
    if (!@_) {
        croak "env_to_nginx: no arguments specified";
    }
    for my $v (@_) {
        if ($v !~ /^[A-Za-z_]/ || $v =~ /\n/) {
            croak "env_to_nginx: bad argument value: $v\n";
        }
        push @EnvToNginx, $v;
    }
}

sub add_block_preprocessor (&) {
    unshift @BlockPreprocessors, shift;
}

sub add_cleanup_handler ($) {
    unshift @CleanupHandlers, shift;
}

# As the real module's: run with the block after each block's run_test
# (skipped blocks included), last added first.
sub add_test_cleanup_handler ($) {
    unshift @TestCleanupHandlers, shift;
}

sub add_response_body_check ($) {
    push @ResponseBodyChecks, shift;
}

sub is_str (@) {
    my ($got, $expected, $desc) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    if (ref $expected && ref $expected eq 'Regexp') {
        return Test::More::like($got, $expected, $desc);
    }
    return Test::More::is($got, $expected, $desc);
}

sub is {
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return Test::More::is($_[0], $_[1], $_[2]);
}

my $DoneTesting;

sub done_testing {
    $DoneTesting = 1;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return Test::More::done_testing(@_);
}

sub bail_out (@) {
    cleanup();
    Test::More::BAIL_OUT(@_);
}

# ----------------------------------------------------------------------
# Blocks (the Test::Base part)
# ----------------------------------------------------------------------

my $BlockList;
my @NextList;

sub _block_list {
    if (!$BlockList) {
        my $spec = do {
            no warnings 'once';
            local $/;
            my $fh = \*main::DATA;
            defined fileno($fh) ? scalar <$fh> : '';
        };
        $BlockList = [Test::Nginx::StandIn::Block->parse_spec($spec)];
    }
    return $BlockList;
}

sub blocks {
    shift if @_ && ref $_[0];
    croak "Invalid arguments passed to 'blocks'" if @_ > 1;
    croak sprintf("'%s' is invalid argument to blocks()", $_[0])
        if @_ && $_[0] !~ /^[a-zA-Z]\w*$/;

    my $section = shift || '';
    my @blocks = $section
                 ? (grep { exists $_->{$section} } @{ _block_list() })
                 : @{ _block_list() };

    return scalar(@blocks) if !wantarray;

    for my $block (@blocks) {
        $block->run_filters if !$block->is_filtered;
    }

    return @blocks;
}

sub next_block {
    if (!@NextList) {
        @NextList = (@{ _block_list() }, undef);
    }
    my $block = shift @NextList;
    if (defined $block && !$block->is_filtered) {
        $block->run_filters;
    }
    return $block;
}

sub first_block {
    @NextList = ();
    return next_block();
}

# ----------------------------------------------------------------------
# Small utilities
# ----------------------------------------------------------------------

sub trim ($) {
    my $s = shift;
    return undef if !defined $s;
    $s =~ s/^\s+|\s+$//g;
    $s =~ s/\n/ /gs;
    $s =~ s/\s{2,}/ /gs;
    return $s;
}

sub fmt_str ($) {
    my $str = shift;
    $str = '' if !defined $str;
    chomp $str;
    $str =~ s/"/\\"/g;
    $str =~ s/\r/\\r/g;
    $str =~ s/\n/\\n/g;
    return $str;
}

sub parse_time ($) {
    my $tm = shift;
    if (defined $tm) {
        if ($tm =~ s/([^_a-zA-Z])ms$/$1/) {
            $tm = $tm / 1000;
        } elsif ($tm =~ s/([^_a-zA-Z])s$/$1/) {
            # seconds
        }
    }
    return $tm;
}

# A process is running when it exists and is not a zombie (daemonized
# nginx processes are not our children, and the container's init may not
# reap them).
sub is_running {
    my $pid = shift;
    return 0 if !defined $pid || $pid !~ /^\d+$/;
    return 0 if !kill(0, $pid);
    if (open my $in, '<', "/proc/$pid/stat") {
        my $stat = <$in>;
        close $in;
        if (defined $stat && $stat =~ /^\d+ \(.*\) (\S)/s) {
            return 0 if $1 eq 'Z' || $1 eq 'X';
        }
    }
    return 1;
}

sub can_run {
    my ($cmd) = @_;

    if ($cmd =~ m{[/\\]}) {
        return (-f $cmd && -x $cmd) ? $cmd : undef;
    }

    for my $dir ((split /:/, $ENV{PATH} || ''), '.') {
        next if $dir eq '';
        my $abs = File::Spec->catfile($dir, $cmd);
        return $abs if -f $abs && -x $abs;
    }

    return undef;
}

sub get_canon_version {
    sprintf "%d.%03d%03d", $_[0], $_[1], $_[2];
}

sub get_canon_version_for_OpenSSL {
    if (defined $_[3]) {
        return sprintf "%d.%03d%03d%03d", $_[0], $_[1], $_[2],
                       ord($_[3]) - ord('a');
    }
    return get_canon_version(@_);
}

sub get_nginx_version {
    my $out = `$NginxBinary -V 2>&1`;
    if (!defined $out || $? != 0) {
        $out = '' if !defined $out;
        bail_out("Failed to get the version of the Nginx in PATH: $out");
    }

    if ($out =~ /^configure arguments:(.*)$/m) {
        $NginxConfigureArgs = $1;
    }

    if ($out =~ m{built with OpenSSL (\d+)\.(\d+)\.(\d+)([a-z])?}s) {
        $OpenSSLVersion = get_canon_version_for_OpenSSL($1, $2, $3, $4);
    }

    if ($out =~ m{(?:nginx|openresty)[^/]*/(\d+)\.(\d+)\.(\d+)}s) {
        $NginxRawVersion = "$1.$2.$3";
        return get_canon_version($1, $2, $3);
    }

    if ($out =~ m{\w+/(\d+)\.(\d+)\.(\d+)}s) {
        $NginxRawVersion = "$1.$2.$3";
        return get_canon_version($1, $2, $3);
    }

    bail_out("Failed to parse the output of \"nginx -V\": $out\n");
}

sub get_pid_from_pidfile {
    my ($name) = @_;
    open my $in, '<', $PidFile
        or bail_out("$name - Failed to open the pid file $PidFile "
                    . "for reading: $!");
    my $pid = do { local $/; <$in> };
    close $in;
    $pid = '' if !defined $pid;
    chomp $pid;
    return $pid;
}

sub gen_rand_port {
    my ($tries, $used_ports) = @_;
    $tries = 1000 if !defined $tries;
    $used_ports ||= {};

    for (my $i = 0; $i < $tries; $i++) {
        my $port = int(rand 63550) + 1985;
        next if $used_ports->{$port};
        my $sock = IO::Socket::INET->new(
            LocalAddr => $ServerAddr,
            LocalPort => $port,
            Proto     => 'tcp',
            Timeout   => 0.1,
        );
        if (defined $sock) {
            $sock->close;
            return $port;
        }
    }

    return undef;
}

sub expand_env_in_text ($$$) {
    my ($text, $name, $rand_ports) = @_;

    return undef if !defined $text;

    my $used_ports = {
        $ServerPort => 1,
        map { $_ => 1 } values %$rand_ports
    };

    $text =~ s{\$(TEST_NGINX_[_A-Z0-9]+)}{
        my $var = $1;
        my $expanded;
        if ($var =~ /^TEST_NGINX_RAND_PORT_[0-9]+$/) {
            if (!defined $rand_ports->{$var}) {
                my $port = gen_rand_port(1000, $used_ports);
                if (!defined $port) {
                    bail_out("$name - Cannot find an available listening "
                             . "port number for $var.\n");
                }
                $rand_ports->{$var} = $port;
                $used_ports->{$port} = 1;
            }
            $expanded = $rand_ports->{$var};

        } else {
            if (!defined $ENV{$var}) {
                bail_out("$name - No environment $var defined.\n");
            }
            $expanded = $ENV{$var};
        }
        $expanded;
    }eg;

    return $text;
}

sub parse_headers ($) {
    my $s = shift;
    my %headers;
    $s = '' if !defined $s;
    open my $in, '<', \$s;
    while (<$in>) {
        s/^\s+|\s+$//g;
        my $neg = ($_ =~ s/^!\s*//);
        if ($neg) {
            $headers{$_} = undef;
        } else {
            my ($key, $val) = split /\s*:\s*/, $_, 2;
            $headers{$key} = $val;
        }
    }
    close $in;
    return \%headers;
}

# ----------------------------------------------------------------------
# Logs
# ----------------------------------------------------------------------

sub error_log_data {
    # for messages logged in the log phase, after the connection closes
    sleep $TestNginxSleep * 3;

    open my $in, '<', $ErrLogFile or return undef;

    if (!$CheckAccumErrLog && $ErrLogFilePos > 0) {
        seek $in, $ErrLogFilePos, 0;
    }

    my @lines = <$in>;

    if (!$CheckAccumErrLog) {
        $ErrLogFilePos = tell($in);
    }

    close $in;
    return \@lines;
}

sub access_log_data {
    sleep $TestNginxSleep * 3;

    open my $in, '<', $AccLogFile or do {
        if ($AccLogFile ne 'off') {
            die "open $AccLogFile failed: $!";
        }
        return undef;
    };

    my @lines = <$in>;
    close $in;
    return \@lines;
}

sub _value_contains ($$) {
    my ($val, $pat) = @_;

    if (!ref $val || ref $val eq 'Regexp') {
        return $val =~ /\Q$pat\E/;
    }

    if (ref $val eq 'ARRAY') {
        for my $v (@$val) {
            return 1 if defined $v && _value_contains($v, $pat);
        }
    }

    return undef;
}

sub _pattern_list ($) {
    my $pats = shift;

    if (!ref $pats) {
        chomp $pats;
        return [split /\n+/, $pats];
    }

    if (ref $pats eq 'Regexp') {
        return [$pats];
    }

    return [@$pats];
}

sub _line_matches ($$) {
    my ($line, $pat) = @_;
    return (ref $pat && $line =~ /$pat/) || $line =~ /\Q$pat\E/;
}

# "--- xxx_log" (must match) checks: one subtest per pattern.
sub _check_log_must_match {
    my ($name, $what, $file, $pats, $lines, $dry_run, $suffix) = @_;

    for my $line (@$lines) {
        for my $pat (@$pats) {
            next if !defined $pat;
            if (_line_matches($line, $pat)) {
                SKIP: {
                    Test::More::skip("$name - $what - tests skipped due to "
                                     . "$dry_run", 1) if $dry_run;
                    Test::More::pass("$name - pattern \"$pat\" matches a "
                                     . "line in $file$suffix");
                }
                undef $pat;
            }
        }
    }

    for my $pat (@$pats) {
        next if !defined $pat;
        SKIP: {
            Test::More::skip("$name - $what - tests skipped due to "
                             . "$dry_run", 1) if $dry_run;
            Test::More::fail("$name - pattern \"$pat\" should match a line "
                             . "in $file$suffix");
        }
    }
}

# "--- no_xxx_log" (must not match) checks: one subtest per pattern, or
# one failure per matching line.
sub _check_log_must_not_match {
    my ($name, $what, $file, $pats, $lines, $dry_run, $suffix,
        $show_more) = @_;

    my %found;
    my $i = 0;
    for my $line (@$lines) {
        for my $pat (@$pats) {
            next if !defined $pat;
            if (_line_matches($line, $pat)) {
                if ($found{$pat}) {
                    Test::More->builder->no_ending(1);
                } else {
                    $found{$pat} = 1;
                }

                SKIP: {
                    Test::More::skip("$name - $what - tests skipped due to "
                                     . "$dry_run ($line)", 1) if $dry_run;
                    my $ln = fmt_str($line);
                    my $p = fmt_str($pat);
                    my $more = '';
                    if ($show_more) {
                        for (my $j = $i + 1;
                             $j < min($i + 10, @$lines - 1); $j++)
                        {
                            $more .= $lines->[$j];
                        }
                    }
                    Test::More::fail("$name - pattern \"$p\" should not "
                                     . "match any line in $file but matches "
                                     . "line \"$ln\"$suffix"
                                     . ($show_more ? "\n$more" : ''));
                }
            }
        }
    } continue {
        $i++;
    }

    for my $pat (@$pats) {
        next if !defined $pat || $found{$pat};
        SKIP: {
            Test::More::skip("$name - $what - tests skipped due to "
                             . "$dry_run", 1) if $dry_run;
            my $p = fmt_str($pat);
            Test::More::pass("$name - pattern \"$p\" does not match a line "
                             . "in $file$suffix");
        }
    }
}

sub check_error_log {
    my ($block, $res, $dry_run, $repeated_req_idx, $need_array) = @_;
    my $name = $block->name;
    my $lines;

    my %check = (alert => 1, crit => 1, emerg => 1);

    my $grep_pat;
    my $grep_pats = $block->grep_error_log;
    if (defined $grep_pats) {
        if (ref $grep_pats && ref $grep_pats eq 'ARRAY') {
            $grep_pat = $grep_pats->[$repeated_req_idx];
        } else {
            $grep_pat = $grep_pats;
        }

    } elsif (defined $block->grep_error_log_out) {
        bail_out("$name - No --- grep_error_log defined but "
                 . "--- grep_error_log_out is defined");
    }

    if (defined $grep_pat) {
        my $expected = $block->grep_error_log_out;
        if (!defined $expected) {
            bail_out("$name - No --- grep_error_log_out defined but "
                     . "--- grep_error_log is defined");
        }

        if (ref $expected && ref $expected eq 'ARRAY') {
            $expected = $expected->[$repeated_req_idx];
        }

        SKIP: {
            Test::More::skip("$name - error_log - tests skipped due to "
                             . "$dry_run", 1) if $dry_run;

            $lines ||= error_log_data();

            my $matched_lines = '';
            for my $line (@$lines) {
                my $matched;
                if (ref $grep_pat && $line =~ /$grep_pat/) {
                    $matched = $&;
                } elsif ($line =~ /\Q$grep_pat\E/) {
                    $matched = $&;
                }
                if (defined $matched && $matched !~ /\n/) {
                    $matched_lines .= $matched . "\n";
                }
            }

            if (ref $expected && ref $expected eq 'Regexp') {
                Test::More::like($matched_lines, $expected,
                    "$name - grep_error_log_out (req $repeated_req_idx)");
            } else {
                Test::More::is($matched_lines, $expected,
                    "$name - grep_error_log_out (req $repeated_req_idx)");
            }
        }
    }

    for my $section (qw( error_log no_error_log )) {
        my $pats = $block->$section;
        next if !defined $pats;

        for my $level (keys %check) {
            delete $check{$level} if _value_contains($pats, "[$level");
        }

        $pats = _pattern_list($pats);
        $lines ||= error_log_data();

        if ($section eq 'error_log') {
            _check_log_must_match($name, 'error_log', 'error.log', $pats,
                                  $lines, $dry_run,
                                  " (req $repeated_req_idx)");
        } else {
            _check_log_must_not_match($name, 'no_error_log', 'error.log',
                                      $pats, $lines, $dry_run,
                                      " (req $repeated_req_idx)", 1);
        }
    }

    # like the real module: [alert], [crit] and [emerg] lines are warned
    # about (not failed) unless a check above mentions them
    if (!$dry_run) {
        for my $level (qw( alert crit emerg )) {
            next if !$check{$level};
            $lines ||= error_log_data();
            for my $line (@$lines) {
                if ($line =~ /\[$level\]/) {
                    my $ln = fmt_str($line);
                    warn "WARNING: $name - $ln\n";
                }
            }
        }
    }

    for my $line (@$lines) {
        if ($line =~ /\bAssertion .*?failed\b/) {
            Test::More->builder->no_ending(1);
            my $l = $line;
            chomp $l;
            Test::More::fail("$name - $l\n");
        }
    }
}

sub check_access_log {
    my ($block, $dry_run, $repeated_req_idx) = @_;
    my $name = $block->name;
    my $lines;

    if (defined $block->access_log) {
        my $pats = _pattern_list($block->access_log);
        $lines ||= access_log_data();
        _check_log_must_match($name, 'access_log', 'access.log', $pats,
                              $lines, $dry_run, " (req $repeated_req_idx)");
    }

    if (defined $block->no_access_log) {
        my $pats = _pattern_list($block->no_access_log);
        $lines ||= access_log_data();
        _check_log_must_not_match($name, 'no_access_log', 'access.log',
                                  $pats, $lines, $dry_run,
                                  " (req $repeated_req_idx)", 1);
    }
}

sub check_shutdown_error_log {
    my ($block, $dry_run) = @_;
    my $name = $block->name;
    my $lines;

    my $pats = _pattern_list($block->shutdown_error_log);

    if (defined $block->no_shutdown_error_log) {
        my $npats = _pattern_list($block->no_shutdown_error_log);
        $lines ||= error_log_data();
        _check_log_must_not_match($name, 'no_shutdown_error_log',
                                  'error.log', $npats, $lines,
                                  $dry_run, '', 0);
    }

    $lines ||= error_log_data();
    _check_log_must_match($name, 'shutdown_error_log', 'error.log', $pats,
                          $lines, $dry_run, '');

    for my $line (@$lines) {
        if ($line =~ /\bAssertion .*? failed\.$/) {
            Test::More->builder->no_ending(1);
            my $l = $line;
            chomp $l;
            Test::More::fail("$name - $l");
        }
    }
}

sub check_prev_block_shutdown_error_log {
    my $block = $PrevBlock;
    return if !defined $block;

    if (defined $block->shutdown_error_log) {
        my $dry_run = $ENV{TEST_NGINX_NO_CLEAN} ? 1 : 0;
        check_shutdown_error_log($block, $dry_run);
    }
}

# ----------------------------------------------------------------------
# nginx process management
# ----------------------------------------------------------------------

sub kill_process {
    my ($pid, $wait, $name) = @_;

    if ($wait) {
        kill(SIGQUIT, $pid) if defined $pid;

        my $timeout_val = timeout();
        while ($timeout_val > 0 && is_running($pid)) {
            waitpid($pid, WNOHANG);
            sleep 0.05;
            $timeout_val -= 0.05;
        }

        if (is_running($pid)) {
            warn "$name - timeout when waiting for the process $pid to exit\n";
            if (getpgrp($pid) == $pid) {
                kill(SIGKILL, -$pid);
                sleep 0.05;
            } else {
                kill(SIGKILL, $pid);
                waitpid($pid, WNOHANG);
            }
        }
    }

    my $step = $TestNginxSleep;
    for (my $i = 1; $i <= 20; $i++) {
        return if !is_running($pid);

        if (kill(SIGTERM, $pid) == 0) {
            warn "WARNING: failed to send term signal to the child process "
                 . "with PID $pid.\n";
        }

        $step *= 1.2;
        $step = 0.5 if $step > 0.5;
        sleep $step;
        waitpid($pid, WNOHANG);
    }

    warn "$name - WARNING: killing the child process $pid with force...\n";

    if (getpgrp($pid) == $pid) {
        kill(SIGKILL, -$pid);
        sleep 0.05;
    } else {
        kill(SIGKILL, $pid);
        waitpid($pid, WNOHANG);
    }
}

sub cleanup_test ($) {
    my $block = shift;
    for my $hdl (@TestCleanupHandlers) {
        $hdl->($block);
    }
}

sub cleanup {
    for my $hdl (@CleanupHandlers) {
        $hdl->();
    }
}

sub setup_server_root {
    my $first_time = shift;

    if (-d $ServRoot) {
        # as the real module: only remove what the scaffold creates
        remove_tree($ConfDir, glob("$ServRoot/*_cache"),
                    glob("$ServRoot/*_temp"));
        remove_tree($HtmlDir, $LogDir);
        rmdir $ServRoot
            or bail_out("Can't remove $ServRoot (not empty?): $!");
    }

    for my $dir ($ServRoot, $LogDir, $HtmlDir, $ConfDir) {
        if (!-d $dir) {
            make_path($dir) or bail_out("Failed to do mkdir $dir\n");
        }
    }

    my $index_file = "$HtmlDir/index.html";
    open my $out, '>', $index_file
        or bail_out("Can't open $index_file for writing: $!\n");
    print $out '<html><head><title>It works!</title></head>'
               . '<body>It works!</body></html>';
    close $out;
}

sub write_user_files {
    my ($block, $rand_ports) = @_;

    my $name = $block->name;

    my $files = $block->user_files;
    return if !$files;

    if (!ref $files) {
        my $raw = $files;
        open my $in, '<', \$raw;

        $files = [];
        my ($fname, $body, $date);
        while (<$in>) {
            if (/>>> (\S+)(?:\s+(.+))?/) {
                push @$files, [$fname, $body, $date] if $fname;
                $fname = $1;
                $date = $2;
                undef $body;
            } else {
                $body .= $_;
            }
        }
        push @$files, [$fname, $body, $date] if $fname;
        close $in;

    } elsif (ref $files ne 'ARRAY') {
        bail_out("$name - wrong value type: " . ref($files)
                 . ", only scalar or ARRAY are accepted");
    }

    for my $file (@$files) {
        my ($fname, $body, $date) = @$file;
        $body = '' if !defined $body;

        my $path = $fname =~ m{^/} ? $fname : "$HtmlDir/$fname";

        if ($path =~ m{(.*)/}) {
            my $dir = $1;
            if (!-d $dir) {
                make_path($dir)
                    or bail_out("$name - Cannot create directory $dir");
            }
        }

        $body = expand_env_in_text($body, $name, $rand_ports);

        open my $out, '>', $path
            or bail_out("$name - Cannot open $path for writing: $!\n");
        binmode $out;
        print $out $body;
        close $out;

        if ($date) {
            local $ENV{TZ} = 'GMT';
            system('touch', '-t', $date, $path) == 0
                or bail_out("Failed to run shell command: touch -t $date "
                            . "$path\n");
        }
    }
}

sub _nginx_has_module {
    my $mod = shift;
    return $NginxConfigureArgs !~ /--without-\Q$mod\E(?:\s|$)/;
}

sub write_config_file {
    my ($block, $config, $rand_ports) = @_;

    my $name = $block->name;
    my $http_config = $block->http_config;
    my $main_config = $block->main_config;
    my $post_main_config = $block->post_main_config;
    my $err_log_file = $block->error_log_file;
    my $server_name = $block->server_name;

    $http_config = expand_env_in_text($http_config, $name, $rand_ports);

    $config = '' if !defined $config;
    $http_config = '' if !defined $http_config;
    $main_config = '' if !defined $main_config;

    if ($LoadModules) {
        my @modules = map { "load_module $_;" } grep { $_ }
                      split /\s+/, $LoadModules;
        $main_config .= join ' ', @modules if @modules;
    }

    $main_config = expand_env_in_text($main_config, $name, $rand_ports);

    $post_main_config = '' if !defined $post_main_config;
    $post_main_config = expand_env_in_text($post_main_config, $name,
                                           $rand_ports);

    $err_log_file = $ErrLogFile if !$err_log_file;
    $server_name = $ServerName if !defined $server_name;

    # Stand-in addition: keep every temp path inside the server root.
    # The real module relies on nginx's built-in relative defaults, but
    # distribution builds (e.g. Debian's) use absolute /var/lib/nginx/...
    # paths.  Skipped when the test's http_config sets them itself.
    my $temp_paths = '';
    for my $t (['client_body_temp_path', 'client_body_temp', undef],
               ['proxy_temp_path',       'proxy_temp',   'http_proxy_module'],
               ['fastcgi_temp_path',     'fastcgi_temp', 'http_fastcgi_module'],
               ['uwsgi_temp_path',       'uwsgi_temp',   'http_uwsgi_module'],
               ['scgi_temp_path',        'scgi_temp',    'http_scgi_module'])
    {
        my ($directive, $dir, $mod) = @$t;
        next if $mod && !_nginx_has_module($mod);
        next if $http_config =~ /\b\Q$directive\E\b/;
        $temp_paths .= "    $directive $ServRoot/$dir;\n";
    }

    my $listen_opts = '';
    $listen_opts .= ' reuseport' if $ReusePort;

    my $listen = defined $ListenAddr && $ListenAddr ne ''
                 ? "$ListenAddr:$ServerPort" : $ServerPort;

    open my $out, '>', $ConfFile
        or bail_out("Can't open $ConfFile for writing: $!\n");

    print $out <<_EOC_;
worker_processes  $Workers;
daemon $DaemonEnabled;
master_process $MasterProcessEnabled;
error_log $err_log_file $LogLevel;
pid       $PidFile;
env MOCKEAGAIN_VERBOSE;
env MOCKEAGAIN;
env MOCKEAGAIN_WRITE_TIMEOUT_PATTERN;
env LD_PRELOAD;
env LD_LIBRARY_PATH;
env DYLD_INSERT_LIBRARIES;
env DYLD_FORCE_FLAT_NAMESPACE;
_EOC_

    for my $v (@EnvToNginx) {
        my $e = $v =~ /\s/ ? "'$v'" : $v;
        print $out "env $e;\n";
    }

    print $out <<_EOC_;
#env LUA_PATH;
#env LUA_CPATH;

$main_config

http {
    access_log $AccLogFile;
    #access_log off;

    default_type text/plain;
    keepalive_timeout  68;

$temp_paths
$http_config

    server {
        listen          $listen$listen_opts;
        server_name     '$server_name';

        client_max_body_size 30M;
        #client_body_buffer_size 4k;

        # Begin preamble config...
$ConfigPreamble
        # End preamble config...

        # Begin test case config...
$config
        # End test case config.

_EOC_

    if (!$NoRootLocation) {
        print $out <<_EOC_;
        location / {
            root $HtmlDir;
            index index.html index.htm;
        }
_EOC_
    }

    print $out "    }\n";

    print $out <<_EOC_;
}

$post_main_config

#timer_resolution 100ms;

events {
    accept_mutex off;

    worker_connections  $WorkerConnections;
_EOC_

    print $out "    use $EventType;\n" if $EventType;

    print $out "}\n";

    print $out <<_EOC_;
env ASAN_OPTIONS;
env MOCKNOEAGAIN_VERBOSE;
env MOCKNOEAGAIN;
_EOC_

    if (defined $WorkerUser) {
        print $out "user $WorkerUser;\n";

    } elsif ($> == 0) {  # being root
        print $out "user root;\n";
    }

    close $out;
}

sub check_if_missing_directives {
    open my $in, '<', $ErrLogFile or return 0;
    while (<$in>) {
        if (/\[emerg\] \S+?: unknown directive "([^"]+)"/) {
            close $in;
            return $1;
        }
    }
    close $in;
    return 0;
}

sub _error_log_tail {
    my $n = shift || 20;
    open my $in, '<', $ErrLogFile or return '';
    my @lines = <$in>;
    close $in;
    @lines = @lines[-$n .. -1] if @lines > $n;
    return join '', @lines;
}

sub _nginx_gone {
    return 0 if $NoNginxManager;
    return 0 if !-f $PidFile;
    open my $in, '<', $PidFile or return 0;
    my $pid = <$in>;
    close $in;
    return 0 if !defined $pid;
    chomp $pid;
    return 0 if $pid !~ /^\d+$/;
    return is_running($pid) ? 0 : $pid;
}

# ----------------------------------------------------------------------
# Test driver
# ----------------------------------------------------------------------

sub run_tests () {
    $NginxVersion = get_nginx_version();

    if (!defined $ENV{TEST_NGINX_SERVER_PORT}) {
        $ENV{TEST_NGINX_SERVER_PORT} = $ServerPort;
    }

    for my $block ($NoShuffle ? blocks() : shuffle(blocks())) {
        for my $hdl (@BlockPreprocessors) {
            $hdl->($block);
        }

        $block->set_value('name', $0 . ' ' . $block->name);
        run_test($block);
        cleanup_test($block);

        $PrevBlock = $block;
    }

    cleanup();
}

sub run_test ($) {
    my $block = shift;

    return if defined $block->SKIP;

    my $name = $block->name;

    my $first_time;
    if ($FirstTime) {
        $first_time = 1;
        undef $FirstTime;
    }

    my $rand_ports = {};

    my $config = expand_env_in_text($block->config, $name, $rand_ports);

    my $dry_run = 0;
    my $should_restart = 1;
    my $should_reconfig = 1;

    local $LogLevel = $LogLevel;
    if ($block->log_level) {
        $LogLevel = $block->log_level;
    }

    my $must_die;
    if (defined $block->must_die) {
        $must_die = $block->must_die;
    }

    if (!defined $config) {
        if (!$NoNginxManager && !defined $PrevConfig) {
            bail_out("$name - No '--- config' section specified and could "
                     . "not get previous one. Use TEST_NGINX_NO_NGINX_MANAGER ?");
        }
        $should_restart = 0;
        $should_reconfig = 0;

    } elsif ($NoNginxManager) {
        Test::More::diag("NO_NGINX_MANAGER activated: config for $name ignored");
        $should_restart = 0;
        $should_reconfig = 0;

    } else {
        $should_reconfig = (!defined $PrevConfig || $config ne $PrevConfig)
                           ? 1 : 0;
        $should_restart = ($should_reconfig || $ForceRestartOnTest) ? 1 : 0;
    }

    # skip_eval / skip_nginx / skip_nginx2 / todo
    my ($tests_to_skip, $should_skip, $skip_reason);

    my $skip_eval = $block->skip_eval;
    if (defined $skip_eval) {
        if ($skip_eval =~ m{^ \s* (\d+) \s* : \s* (.*)}xs) {
            $tests_to_skip = $1;
            $skip_reason = 'skip_eval';
            my $code = $2;
            my $err;
            ($should_skip, $err) = Test::Nginx::Util::block_eval($block, $code);
            if ($err) {
                bail_out("$name - skip_eval - failed to eval the Perl code "
                         . "\"$code\": $err");
            }
        }
    }

    my $skip_nginx = $block->skip_nginx;
    my $skip_nginx2 = $block->skip_nginx2;
    if (defined $skip_nginx) {
        if ($skip_nginx =~ m{
                ^ \s* (\d+) \s* : \s*
                    ([<>]=?) \s* (\d+)\.(\d+)\.(\d+)
                    (?: \s* : \s* (.*) )?
                \s*$}x)
        {
            $tests_to_skip = $1;
            my ($op, $ver1, $ver2, $ver3) = ($2, $3, $4, $5);
            $skip_reason = $6 || "nginx version $op $ver1.$ver2.$ver3";
            my $ver = get_canon_version($ver1, $ver2, $ver3);
            if ((!defined $NginxVersion && $op =~ /^</)
                || (defined $NginxVersion && eval "$NginxVersion $op $ver"))
            {
                $should_skip = 1;
            }
        } else {
            bail_out("$name - Invalid --- skip_nginx spec: $skip_nginx");
        }

    } elsif (defined $skip_nginx2) {
        if ($skip_nginx2 =~ m{
                ^ \s* (\d+) \s* : \s*
                    ([<>]=?) \s* (\d+)\.(\d+)\.(\d+)
                    \s* (or|and) \s*
                    ([<>]=?) \s* (\d+)\.(\d+)\.(\d+)
                    (?: \s* : \s* (.*) )?
                \s*$}x)
        {
            $tests_to_skip = $1;
            my ($opa, $va) = ($2, get_canon_version($3, $4, $5));
            my $opx = $6;
            my ($opb, $vb) = ($7, get_canon_version($8, $9, $10));
            $skip_reason = $11;
            if (!defined $NginxVersion
                || ($opx eq 'or' && (eval "$NginxVersion $opa $va"
                                     || eval "$NginxVersion $opb $vb"))
                || ($opx eq 'and' && (eval "$NginxVersion $opa $va"
                                      && eval "$NginxVersion $opb $vb")))
            {
                $should_skip = 1;
            }
        } else {
            bail_out("$name - Invalid --- skip_nginx2 spec: $skip_nginx2");
        }
    }

    $skip_reason = 'various reasons' if !defined $skip_reason;

    my ($should_todo, $todo_reason);
    my $todo = $block->todo;
    if (defined $todo) {
        if ($todo =~ m{^ \s* (\d+) \s* : \s* (.*)}xs) {
            $should_todo = 1;
            $tests_to_skip = $1;
            $todo_reason = $2;
        } else {
            bail_out("$name - Invalid --- todo spec: $todo");
        }
    }
    $todo_reason = 'various reasons' if !defined $todo_reason;

    if (!$NoNginxManager && !$should_skip && $should_restart) {
        $PrevConfig = $config if $should_reconfig;

        # stop the nginx started for the previous block (by its pid)
        if (-f $PidFile) {
            my $pid = get_pid_from_pidfile($name);
            if (defined $pid && $pid ne '' && is_running($pid)) {
                kill_process($pid, 1, $name);
            } elsif (-f $PidFile) {
                unlink $PidFile
                    or warn "WARNING: failed to remove pid file $PidFile\n";
            }
        }

        check_prev_block_shutdown_error_log();

        setup_server_root($first_time);
        write_user_files($block, $rand_ports);
        write_config_file($block, $config, $rand_ports);

        if (!can_run($NginxBinary)) {
            bail_out("$name - Cannot find the nginx executable in the PATH "
                     . "environment");
        }

        $NginxVersion = $LatestNginxVersion if !defined $NginxVersion;

        # Stand-in: nginx's stderr is appended to the error log, so that
        # messages nginx prints before it opens its own error log (e.g.
        # "[emerg] unknown directive" from builds whose default error log
        # is stderr, like Debian's) end up in error.log, as they do with
        # a default nginx build.
        my $cmd = "$NginxBinary -p $ServRoot/ -c $ConfFile > /dev/null "
                  . "2>>$ErrLogFile";

        $ErrLogFilePos = 0;

        if (defined $must_die) {
            for (my $i = 0; $i < $RepeatEach; $i++) {
                system($cmd);
                my $status = $?;

                my ($exec_failed, $coredump, $exit_code);
                if ($status == -1) {
                    $exec_failed = 1;
                } else {
                    $exit_code = $status >> 8;
                    $coredump = $status & 128;
                }

                if ($exec_failed) {
                    Test::More::fail("$name - failed to execute the nginx "
                                     . "command line");
                } elsif ($coredump) {
                    Test::More::fail("$name - nginx core dumped");
                } elsif (looks_like_number($must_die)) {
                    Test::More::is($must_die, $exit_code,
                                   "$name - die with the expected exit code");
                } else {
                    Test::More::isnt($status, 0, "$name - die as expected");
                }

                check_error_log($block, undef, $dry_run, $i, 0);

                if ($status == 0) {
                    warn "WARNING: $name - nginx must die but it does not; "
                         . "killing it (req $i)\n";
                    for (1 .. 15) {
                        last if -f $PidFile;
                        sleep $TestNginxSleep;
                    }
                    if (-f $PidFile) {
                        my $pid = get_pid_from_pidfile($name);
                        kill_process($pid, 1, $name);
                    }
                }
            }

            return;
        }

        my $waited = 0;
        my $try = 0;
        while (1) {
            system($cmd);
            my $status = $?;
            last if $status == 0;

            if ($ENV{TEST_NGINX_IGNORE_MISSING_DIRECTIVES}
                and my $directive = check_if_missing_directives())
            {
                $dry_run = "the lack of directive $directive";
                last;
            }

            # The real module retries for up to 30 seconds and then bails
            # out.  Here only a busy port is retried (briefly); any other
            # start failure fails the block.
            my $log = _error_log_tail(5);
            if ($log =~ /Address already in use/ && $waited < 5) {
                $try++;
                my $delay = 0.1 * $try;
                $delay = 1 if $delay > 1;
                sleep $delay;
                $waited += $delay;
                next;
            }

            Test::More::fail("$name - Cannot start nginx using command "
                             . "\"$cmd\" (status code $status).");
            Test::More::diag("error.log:\n" . _error_log_tail(20));
            $NginxStartFailed = $name;
            return;
        }

        undef $NginxStartFailed;
        sleep $TestNginxSleep;

    } elsif (!$NoNginxManager && !$should_skip && defined $NginxStartFailed) {
        # A block that keeps the previous nginx, which did not start: it
        # fails at once rather than after connection retries (whose third
        # abort in a file bails out).
        Test::More::fail("$name - no nginx to send the requests to: it did "
                         . "not start for \"$NginxStartFailed\"");
        return;
    }

    if ($block->init) {
        my (undef, $err) = Test::Nginx::Util::block_eval($block, $block->init);
        if ($err) {
            # The real module bails out here, which stops the whole prove
            # run. The stand-in fails this block only: its requests are not
            # sent (nor are they by the real module), and the later blocks
            # and files run.
            (my $why = "$err") =~ s/\s+\z//;
            Test::More::fail("$name - init failed: $why");
            return;
        }
    }

    my $i = 0;
    $ErrLogFilePos = 0;
    while ($i++ < $RepeatEach) {
        if ($i > 1) {
            write_user_files($block, $rand_ports);
        }

        if ($should_skip && defined $tests_to_skip) {
            SKIP: {
                Test::More::skip("$name - $skip_reason", $tests_to_skip);
                run_test_helper($block, $dry_run, $i - 1);
            }

        } elsif ($should_todo) {
            TODO: {
                Test::More::todo_skip("$name - $todo_reason", $tests_to_skip);
                run_test_helper($block, $dry_run, $i - 1);
            }

        } else {
            run_test_helper($block, $dry_run, $i - 1);
        }
    }

    if (my $total_errlog = $ENV{TEST_NGINX_ERROR_LOG}) {
        if (-s $ErrLogFile) {
            if (open my $out, '>>', $total_errlog) {
                print $out "\n=== $0 $name\n";
                if (open my $in, '<', $ErrLogFile) {
                    local $/;
                    my $data = <$in>;
                    print $out $data if defined $data;
                    close $in;
                }
                close $out;
            } else {
                bail_out("Failed to append test case title to "
                         . "$total_errlog: $!\n");
            }
        }
    }
}

# ----------------------------------------------------------------------
# Requests
# ----------------------------------------------------------------------

# Parses a "request" string: "METHOD [URI [VERSION]]\n[body]".
sub parse_request {
    my ($name, $raw) = @_;

    $raw = '' if !defined $raw;

    my ($first, $content);
    if ($raw =~ /\A([^\n]*\n?)(.*)\z/s) {
        ($first, $content) = ($1, $2);
    }

    if (!defined $first || $first eq '') {
        bail_out("$name - Request line should be non-empty");
    }

    my ($meth, $url, $ver);
    if ($first =~ /^(\s*)(\S+)( *)((\S+)( *))?((\S+)( *))?(\s*)$/) {
        $meth = $2;
        $url = $5;
        $ver = $8;
    } else {
        bail_out("$name - Request line is not valid. Should be 'meth [url "
                 . "[version]]' but got \"$first\".");
    }

    $url = '/' if !defined $url;
    $ver = 'HTTP/1.1' if !defined $ver;

    return {
        first_line_len => length($first),
        method         => $meth,
        url            => $url,
        http_ver       => $ver,
        content        => $content,
    };
}

sub parse_more_headers {
    my ($in) = @_;
    my @headers = split /\n+/, defined $in ? $in : '';
    my $is_chunked;
    my $out = '';
    for my $header (@headers) {
        next if $header =~ /^\s*\#/;
        my ($key, $val) = split /:\s*/, $header, 2;
        $val = '' if !defined $val;
        if (lc($key) eq 'transfer-encoding' && $val eq 'chunked') {
            $is_chunked = 1;
        }
        $out .= "$key: $val\r\n";
    }
    return ($out, $is_chunked);
}

# Builds the wire request from the packets of a "request": the request
# line is normalized, Host/Connection (and Content-Length when there is a
# body) headers are added, and the packet boundaries are kept.
sub build_request_from_packets {
    my ($name, $more_headers, $is_chunked, $conn_header, $packets) = @_;

    my $raw = join '', map { defined $_ ? $_ : '' } @$packets;
    my $req = parse_request($name, $raw);

    my $content = $req->{content};
    my $content_skip = 0;     # leading bytes removed from the body

    my $len_header = '';
    if (!$is_chunked
        && $content ne ''
        && $more_headers !~ /(?:^|\n)Content-Length:/)
    {
        if ($content =~ /^(\s+)/) {
            $content_skip = length $1;
        }
        $content =~ s/^\s+|\s+$//gs;
        $len_header = 'Content-Length: ' . length($content) . "\r\n";
    }

    $more_headers =~ s/(?<!\r)\n/\r\n/gs;

    my $headers = '';
    if ($more_headers !~ /(?:^|\n)Host:/msi) {
        $headers .= "Host: $ServerName\r\n";
    }
    if ($more_headers !~ /(?:^|\n)Connection/msi) {
        $headers .= "Connection: $conn_header\r\n";
    }
    $headers .= "$more_headers$len_header\r\n";

    my $line = "$req->{method} $req->{url} $req->{http_ver}";
    my $head = "$line\r\n$headers";
    my $new = $head . $content;

    return [$new] if @$packets <= 1;

    # map the original packet boundaries onto the new request
    my $first_len = $req->{first_line_len};
    my @out;
    my ($orig_off, $new_prev) = (0, 0);
    for (my $k = 0; $k < @$packets - 1; $k++) {
        $orig_off += length(defined $packets->[$k] ? $packets->[$k] : '');
        my $pos;
        if ($orig_off < $first_len) {
            $pos = min($orig_off, length $line);
        } else {
            my $c = $orig_off - $first_len - $content_skip;
            $c = 0 if $c < 0;
            $c = length($content) if $c > length($content);
            $pos = length($head) + $c;
        }
        $pos = $new_prev if $pos < $new_prev;
        push @out, substr($new, $new_prev, $pos - $new_prev);
        $new_prev = $pos;
    }
    push @out, substr($new, $new_prev);
    return \@out;
}

# Returns the list of requests of a block; each request is a list of
# packets ({ value => ..., delay_before => ... }).
sub get_req_from_block {
    my ($block) = @_;
    my $name = $block->name;

    my @req_list;

    if (defined $block->raw_request) {
        my $rr = $block->raw_request;
        if (ref $rr && ref $rr eq 'ARRAY') {
            push @req_list, [map { +{ value => $_ } } @$rr];
        } else {
            push @req_list, [{ value => $rr }];
        }
        return \@req_list;
    }

    my $request;
    if (defined $block->request_eval) {
        Test::More::diag("$name - request_eval DEPRECATED. Use request eval "
                         . "instead.");
        $request = eval $block->request_eval;
        warn $@ if $@;

    } else {
        $request = $block->request;
        if (defined $request && !ref $request) {
            while ($request =~ s/^\s*\#[^\n]+\s+|^\s+//gs) {
                # strip leading comment lines and whitespace
            }
        }
    }

    my $more_headers = $block->more_headers || '';

    my $headers_for = sub {
        my ($i, $what) = @_;
        if (ref $more_headers eq 'ARRAY') {
            my $hdr = $more_headers->[$i];
            if (!defined $hdr) {
                bail_out("--- more_headers lacks data for the $what");
            }
            return parse_more_headers($hdr);
        }
        return parse_more_headers($more_headers);
    };

    if ($block->pipelined_requests) {
        my $reqs = $block->pipelined_requests;
        if (!ref $reqs || ref $reqs ne 'ARRAY') {
            bail_out("$name - invalid entries in --- pipelined_requests");
        }
        my $prq = '';
        my $i = 0;
        for my $one (@$reqs) {
            my $conn = $i == @$reqs - 1 ? 'close' : 'keep-alive';
            my ($hdr, $is_chunked) =
                $headers_for->($i, "$i pipelined request");
            my $r = build_request_from_packets($name, $hdr, $is_chunked,
                                               $conn, [$one]);
            $prq .= $r->[0];
            $i++;
        }
        push @req_list, [{ value => $prq }];
        return \@req_list;
    }

    if (!ref $request) {
        my ($hdr, $is_chunked) = $headers_for->(0, 'request');
        my $r = build_request_from_packets($name, $hdr, $is_chunked,
                                           'close', [$request]);
        push @req_list, [{ value => $r->[0] }];

    } elsif (ref $request eq 'ARRAY') {
        my $i = 0;
        for my $one_req (@$request) {
            my ($hdr, $is_chunked) = $headers_for->($i, "${i}th request");

            if (!ref $one_req) {
                my $r = build_request_from_packets($name, $hdr, $is_chunked,
                                                   'close', [$one_req]);
                push @req_list, [{ value => $r->[0] }];

            } elsif (ref $one_req eq 'ARRAY') {
                my @packets;
                for my $p (@$one_req) {
                    if (!ref $p) {
                        push @packets, $p;
                    } elsif (ref $p eq 'HASH') {
                        push @packets, $p->{value};
                    } else {
                        bail_out("$name - Invalid syntax. $p should be a "
                                 . "string or hash with value.");
                    }
                }

                my $new = build_request_from_packets($name, $hdr,
                                                     $is_chunked, 'close',
                                                     \@packets);
                my @transformed;
                my $idx = 0;
                for my $np (@$new) {
                    my $orig = $one_req->[$idx];
                    if (ref $orig) {
                        push @transformed, { %$orig, value => $np };
                    } else {
                        push @transformed, { value => $np };
                    }
                    $idx++;
                }
                push @req_list, \@transformed;

            } else {
                bail_out("$name - Invalid syntax. $one_req should be a "
                         . "string or an array of packets.");
            }

            $i++;
        }

    } else {
        bail_out("$name - invalid ---request : MUST be string or array of "
                 . "requests");
    }

    return \@req_list;
}

# Sends one request (a list of packets) and returns the raw response
# (everything read until the server closes the connection) and whether it
# was a HEAD request.
sub send_request ($$$$;$) {
    my ($req, $middle_delay, $timeout, $block, $tries) = @_;

    my $name = $block->name;

    my @bits = ref $req ? @$req : ({ value => $req });

    my $head_req = (join '', map { defined $_->{value} ? $_->{value} : '' }
                             @bits) =~ /^\s*HEAD\s+/ ? 1 : 0;

    my $server_addr = $block->server_addr_for_client;
    $server_addr = $ServerAddr if !defined $server_addr;

    my $sock = IO::Socket::INET->new(
        PeerAddr => $server_addr,
        PeerPort => $ServerPortForClient,
        Proto    => 'tcp',
        Timeout  => $timeout,
    );

    if (!defined $sock) {
        my $err = $!;
        $tries ||= 1;
        my $total_tries = $TotalConnectingTimeouts ? 20 : 50;

        # stand-in addition: do not keep retrying when our nginx is gone
        if (my $gone = _nginx_gone()) {
            Test::More->builder->no_ending(1);
            Test::More::fail("$name - Can't connect to $server_addr:"
                             . "$ServerPortForClient: $err (nginx process "
                             . "$gone is gone)\n");
            return (undef, $head_req);
        }

        if ($tries <= $total_tries) {
            my $wait = ($TestNginxSleep + $TestNginxSleep * $tries)
                       * $tries / 2;
            $wait = 1 if $wait >= 1;

            if ($wait >= 0.6) {
                warn "$name - Can't connect to $server_addr:"
                     . "$ServerPortForClient: $err\n";
                if ($tries + 1 <= $total_tries) {
                    warn "\tRetry connecting after $wait sec\n";
                }
            }

            sleep $wait;
            return send_request($req, $middle_delay, $timeout, $block,
                                $tries + 1);
        }

        my $msg = "$name - Can't connect to $server_addr:"
                  . "$ServerPortForClient: $err (aborted)\n";
        if (++$TotalConnectingTimeouts < 3) {
            Test::More->builder->no_ending(1);
            Test::More::fail($msg);
        } else {
            bail_out($msg);
        }
        return (undef, $head_req);
    }

    $sock->blocking(0);

    local $SIG{PIPE} = 'IGNORE';

    my $resp = '';
    my $cur = shift @bits;
    my $wbuf = defined $cur->{value} ? $cur->{value} : '';
    my $woff = 0;
    my ($want_read, $want_write) = (1, 1);
    my $sel = IO::Select->new($sock);

  IO:
    while ($want_read || $want_write) {
        $! = 0;
        my ($readable, $writable) =
            IO::Select->select($want_read ? $sel : undef,
                               $want_write ? $sel : undef,
                               undef, $timeout);

        if (!$readable && !$writable) {
            if ($!{EINTR}) {
                next IO;
            }

            # timed out
            close $sock;
            if (!defined $block->abort) {
                Test::More->builder->no_ending(1);
                Test::More::fail("ERROR: client socket timed out - $name\n");
            } else {
                sleep 0.005;
            }
            last IO;
        }

        if ($readable && @$readable) {
            while (1) {
                my $buf;
                my $n = sysread($sock, $buf, 1024);
                if (!defined $n) {
                    last if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
                    warn "WARNING: $name - HTTP response read failure: $!\n";
                    close $sock;
                    last IO;
                }
                if ($n == 0) {
                    # connection closed by the server
                    close $sock;
                    last IO;
                }
                $resp .= $buf;
            }
        }

        if ($want_write && $writable && @$writable) {
            while (1) {
                my $rest = length($wbuf) - $woff;
                if ($rest > 0) {
                    my $n = syswrite($sock, $wbuf, $rest, $woff);
                    if (!defined $n) {
                        last if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
                        my $errmsg = "write failed: $!";
                        warn "$errmsg\n";
                        $resp = $errmsg if !$resp;
                        close $sock;
                        last IO;
                    }
                    $woff += $n;
                    next;
                }

                my $next = shift @bits;
                if (!defined $next) {
                    # all the request data has been written
                    $want_write = 0;
                    my $shutdown = $block->shutdown;
                    if (defined $shutdown) {
                        $shutdown = 1 if $shutdown =~ /^$/s;
                        shutdown($sock, $shutdown);
                    }
                    last;
                }

                $wbuf = defined $next->{value} ? $next->{value} : '';
                $woff = 0;

                my $wait_time;
                if (!defined $next->{delay_before}) {
                    $wait_time = $middle_delay if defined $middle_delay;
                } else {
                    $wait_time = $next->{delay_before};
                }
                sleep $wait_time if $wait_time;
            }
        }
    }

    return ($resp, $head_req);
}

# ----------------------------------------------------------------------
# Responses
# ----------------------------------------------------------------------

sub parse_response {
    my ($name, $raw_resp, $head_req) = @_;

    my $left;

    my $raw_headers = '';
    if ($raw_resp =~ /(.*?\r\n)\r\n/s) {
        $raw_headers = $1;
    }

    my $res = Test::Nginx::StandIn::Response->parse($raw_resp);

    my $code = $res->code;

    my $enc = $res->header('Transfer-Encoding');
    my $len = $res->header('Content-Length');

    if ($code && $code !~ /^\d+$/) {
        undef $code;
        $res->code(undef);
    }

    if ($code && ($code == 304 || $code == 101)) {
        return ($res, $raw_headers);
    }

    if (defined $enc && $enc eq 'chunked') {
        my $raw = $res->content;
        $raw = '' if !defined $raw;

        my $decoded = '';
        while (1) {
            if ($raw =~ /\G 0 [\ \t]* \r\n \r\n /gcsx) {
                if ($raw =~ /\G (.+) /gcsx) {
                    $left = $1;
                }
                last;
            }

            if ($raw =~ m{ \G [\ \t]* ( [A-Fa-f0-9]+ ) [\ \t]* \r\n }gcsx) {
                my $size = hex($1);
                my $pos = pos($raw);
                if (length($raw) - $pos < $size) {
                    Test::More->builder->no_ending(1);
                    Test::More::fail("$name - invalid chunked data received "
                                     . "(not enought octets for the data "
                                     . "section)");
                    return;
                }
                $decoded .= substr($raw, $pos, $size);
                pos($raw) = $pos + $size;

                if ($raw !~ /\G\r\n/gcs) {
                    Test::More->builder->no_ending(1);
                    Test::More::fail("$name - invalid chunked data received "
                                     . "(expected CRLF).");
                    return;
                }

            } elsif ($raw =~ /\G.+/gcs) {
                Test::More->builder->no_ending(1);
                Test::More::fail("$name - invalid chunked body received: $&");
                return;

            } else {
                Test::More->builder->no_ending(1);
                Test::More::fail("$name - no last chunk found - $raw");
                return;
            }
        }

        $res->content($decoded);

    } elsif (defined $len && $len ne '' && $len =~ /^\d+$/) {
        my $raw = $res->content;
        if (length $raw < $len) {
            if (!$head_req) {
                warn "WARNING: $name - response body truncated: $len "
                     . "expected, but got ", length $raw, "\n";
            }

        } elsif (length $raw > $len) {
            $left = substr $raw, $len;
            $res->content(substr $raw, 0, $len);
        }
    }

    return ($res, $raw_headers, $left);
}

# Picks the expected value of a check for the current request (sections
# of multi-request blocks must be arrays).
sub get_indexed_value ($$$$) {
    my ($name, $value, $req_idx, $need_array) = @_;

    if ($need_array) {
        if (ref $value && ref $value eq 'ARRAY') {
            return $value->[$req_idx];
        }
        bail_out("$name - You asked for many requests, the expected results "
                 . "should be arrays as well.");
    }

    if (ref $value && ref $value eq 'ARRAY') {
        if ($req_idx != 0) {
            bail_out("$name - SHOULD NOT HAPPEN: idx != 0 and don't need "
                     . "array.");
        }
        return $value->[0];
    }

    return $value;
}

sub check_error_code {
    my ($block, $res, $dry_run, $req_idx, $need_array) = @_;
    my $name = $block->name;

    SKIP: {
        Test::More::skip("$name - tests skipped due to $dry_run", 1)
            if $dry_run;

        my $got = ($res && $res->code) || '';

        if (defined $block->error_code_like) {
            my $val = get_indexed_value($name, $block->error_code_like,
                                        $req_idx, $need_array);
            Test::More::like($got, qr/$val/sm, "$name - status code ok");

        } elsif (defined $block->error_code) {
            Test::More::is($got,
                           get_indexed_value($name, $block->error_code,
                                             $req_idx, $need_array),
                           "$name - status code ok");

        } else {
            Test::More::is($got, 200, "$name - status code ok");
        }
    }
}

sub check_raw_response_headers {
    my ($block, $raw_headers, $dry_run, $req_idx, $need_array) = @_;
    my $name = $block->name;

    $raw_headers = '' if !defined $raw_headers;

    if (defined $block->raw_response_headers_like) {
        SKIP: {
            Test::More::skip("$name - raw_response_headers_like - tests "
                             . "skipped due to $dry_run", 1) if $dry_run;
            my $expected = get_indexed_value($name,
                                             $block->raw_response_headers_like,
                                             $req_idx, $need_array);
            Test::More::like($raw_headers, qr/$expected/s,
                             "$name - raw resp headers like");
        }
    }

    if (defined $block->raw_response_headers_unlike) {
        SKIP: {
            Test::More::skip("$name - raw_response_headers_unlike - tests "
                             . "skipped due to $dry_run", 1) if $dry_run;
            my $expected = get_indexed_value($name,
                                           $block->raw_response_headers_unlike,
                                           $req_idx, $need_array);
            Test::More::unlike($raw_headers, qr/$expected/s,
                               "$name - raw resp headers unlike");
        }
    }
}

sub check_response_headers {
    my ($block, $res, $raw_headers, $dry_run, $req_idx, $need_array) = @_;
    my $name = $block->name;

    $raw_headers = '' if !defined $raw_headers;

    if (defined $block->response_headers) {
        my $headers = parse_headers(get_indexed_value($name,
                                                      $block->response_headers,
                                                      $req_idx, $need_array));
        while (my ($key, $val) = each %$headers) {
            if (!defined $val) {
                SKIP: {
                    Test::More::skip("$name - response_headers - tests "
                                     . "skipped due to $dry_run", 1)
                        if $dry_run;
                    Test::More::unlike($raw_headers, qr/^\s*\Q$key\E\s*:/ms,
                        "$name - header $key not present in the raw headers");
                }
                next;
            }

            $val =~ s/\$ServerPort\b/$ServerPort/g;
            $val =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;

            my $actual = $res ? $res->header($key) : undef;
            $actual = '' if !defined $actual;

            SKIP: {
                Test::More::skip("$name - response_headers - tests skipped "
                                 . "due to $dry_run", 1) if $dry_run;
                Test::More::is($actual, $val, "$name - header $key ok");
            }
        }

    } elsif (defined $block->response_headers_like) {
        my $headers = parse_headers(get_indexed_value($name,
                                                 $block->response_headers_like,
                                                 $req_idx, $need_array));
        while (my ($key, $val) = each %$headers) {
            my $actual = $res ? $res->header($key) : undef;
            $actual = '' if !defined $actual;
            $val = '' if !defined $val;
            SKIP: {
                Test::More::skip("$name - response_headers_like - tests "
                                 . "skipped due to $dry_run", 1) if $dry_run;
                Test::More::like($actual, qr/^$val$/,
                                 "$name - header $key like ok");
            }
        }
    }
}

sub _run_body_filter {
    my ($block, $filter, $content) = @_;
    my $name = $block->name;

    if (ref $filter && ref $filter eq 'CODE') {
        return $filter->($content);
    }

    if (ref $filter) {
        bail_out("$name - the --- response_body_filters section only "
                 . "supports subroutine reference values and string values");
    }

    if ($filter eq 'md5_hex') {
        require Digest::MD5;
        return Digest::MD5::md5_hex($content);
    }
    if ($filter eq 'sha1_hex') {
        require Digest::SHA;
        return Digest::SHA::sha1_hex($content);
    }
    return uc($content)      if $filter eq 'uc';
    return lc($content)      if $filter eq 'lc';
    return ucfirst($content) if $filter eq 'ucfirst';
    return lcfirst($content) if $filter eq 'lcfirst';
    return length($content)  if $filter eq 'length';

    bail_out("$name - unknown filter, \"$filter\", specified in the "
             . "--- response_body_filters section");
}

sub transform_response_body {
    my ($block, $res, $req_idx) = @_;

    return if !defined $res;

    my $content = $res->content;
    return if !defined $content;

    my $name = $block->name;
    my $filters = $block->response_body_filters;
    return if !defined $filters;

    if (!ref $filters) {
        $filters =~ s/^\s+|\s+$//gs;
        $filters = [split /\s+/, $filters];

    } elsif (ref $filters ne 'ARRAY') {
        $filters = [$filters];
    }

    my $filter = $filters;
    if (ref $filters->[0] eq 'ARRAY') {
        for my $elem (@$filters) {
            if (ref $elem ne 'ARRAY') {
                bail_out("$name - the --- response_body_filters "
                         . "two-dimensional array only be like [[uc], [lc]] "
                         . "not [[uc], lc]");
            }
        }
        $filter = $filters->[$req_idx];
        bail_out("$name - the ---response_body_filters two-dimensional array "
                 . "unmatch the specified request($req_idx)")
            if !defined $filter;
    }

    my $new = $content;
    if (ref $filter && ref $filter eq 'ARRAY') {
        $new = _run_body_filter($block, $_, $new) for @$filter;
    } else {
        $new = _run_body_filter($block, $filter, $new);
    }

    $res->content($new);
}

sub check_response_body {
    my ($block, $res, $dry_run, $req_idx, $repeated_req_idx,
        $need_array) = @_;
    my $name = $block->name;

    if (defined $block->response_body || defined $block->response_body_eval) {
        my $content = $res ? $res->content : undef;
        if (defined $content) {
            $content =~ s/^TE: deflate,gzip;q=0\.3\r\n//gms;
            $content =~ s/^Connection: TE, close\r\n//gms;
        }

        my $expected;
        if ($block->response_body_eval) {
            Test::More::diag("$name - response_body_eval is DEPRECATED. Use "
                             . "response_body eval instead.");
            $expected = eval get_indexed_value($name,
                                               $block->response_body_eval,
                                               $req_idx, $need_array);
            warn $@ if $@;

        } else {
            $expected = get_indexed_value($name, $block->response_body,
                                          $req_idx, $need_array);
        }

        if ($block->charset) {
            require Encode;
            Encode::from_to($expected, 'UTF-8', $block->charset);
        }

        if (defined $expected && !ref $expected) {
            $expected =~ s/\$ServerPort\b/$ServerPort/g;
            $expected =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;
        }

        SKIP: {
            Test::More::skip("$name - response_body - tests skipped due to "
                             . "$dry_run", 1) if $dry_run;
            if (ref $expected) {
                Test::More::like($content, $expected,
                    "$name - response_body - like (repeated req "
                    . "$repeated_req_idx, req $req_idx)");
            } else {
                Test::More::is($content, $expected,
                    "$name - response_body - response is expected (repeated "
                    . "req $repeated_req_idx, req $req_idx)");
            }
        }

    } elsif (defined $block->response_body_like
             || defined $block->response_body_unlike)
    {
        my ($patterns, $type, $cmp);
        if (defined $block->response_body_like) {
            $patterns = $block->response_body_like;
            $type = 'like';
            $cmp = \&Test::More::like;
        } else {
            $patterns = $block->response_body_unlike;
            $type = 'unlike';
            $cmp = \&Test::More::unlike;
        }

        my $content = $res ? $res->content : undef;
        if (defined $content) {
            $content =~ s/^TE: deflate,gzip;q=0\.3\r\n//gms;
            $content =~ s/^Connection: TE, close\r\n//gms;
        }

        my $expected_pat = get_indexed_value($name, $patterns, $req_idx,
                                             $need_array);
        $expected_pat = '' if !defined $expected_pat;
        $expected_pat =~ s/\$ServerPort\b/$ServerPort/g;
        $expected_pat =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;

        my $summary = trim($content);
        $summary = '' if !defined $summary;

        SKIP: {
            Test::More::skip("$name - response_body_$type - tests skipped "
                             . "due to $dry_run", 1) if $dry_run;
            $cmp->($content, qr/$expected_pat/s,
                   "$name - response_body_$type - response is expected "
                   . "($summary)");
        }
    }

    for my $check (@ResponseBodyChecks) {
        $check->($block, $res ? $res->content : undef, $req_idx,
                 $repeated_req_idx, $dry_run);
    }
}

sub run_test_helper {
    my ($block, $dry_run, $repeated_req_idx) = @_;

    my $name = $block->name;

    my $r_req_list = get_req_from_block($block);

    if (!@$r_req_list) {
        bail_out("$name - request empty");
    }

    my $timeout = parse_time($block->timeout);
    $timeout = timeout() if !defined $timeout;

    my $res;
    my $req_idx = 0;
    my ($n, $need_array);

    for my $one_req (@$r_req_list) {
        my ($raw_resp, $head_req);

        if ($dry_run) {
            $raw_resp = "200 OK HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
        } else {
            ($raw_resp, $head_req) =
                send_request($one_req, $block->raw_request_middle_delay,
                             $timeout, $block);
        }

        if ($block->pipelined_requests) {
            $n = @{ $block->pipelined_requests };
            $need_array = 1;
        } else {
            $need_array = $#$r_req_list > 0;
        }

        while (1) {
            $raw_resp = '' if !defined $raw_resp;

            my ($raw_headers, $left);

            if (!defined $block->ignore_response) {
                if (defined $block->http09) {
                    $res = Test::Nginx::StandIn::Response->new(200, 'OK',
                                                                $raw_resp);
                    $raw_headers = '';
                } else {
                    ($res, $raw_headers, $left) =
                        parse_response($name, $raw_resp, $head_req);
                }
            }

            if (!$n) {
                if ($left) {
                    (my $l = $left) =~ s/([\0-\037\200-\377])/
                                         sprintf('\x{%02x}', ord $1)/eg;
                    warn "WARNING: $name - unexpected extra bytes after last "
                         . "chunk in response: \"$l\"\n";
                }
            } else {
                $raw_resp = $left;
                $n--;
            }

            if (!defined $block->ignore_response) {
                check_error_code($block, $res, $dry_run, $req_idx,
                                 $need_array);
                check_raw_response_headers($block, $raw_headers, $dry_run,
                                           $req_idx, $need_array);
                check_response_headers($block, $res, $raw_headers, $dry_run,
                                       $req_idx, $need_array);
                transform_response_body($block, $res, $req_idx);
                check_response_body($block, $res, $dry_run, $req_idx,
                                    $repeated_req_idx, $need_array);
            }

            if ($n || $req_idx < @$r_req_list - 1) {
                if ($block->wait) {
                    sleep $block->wait;
                }

                check_error_log($block, $res, $dry_run, $repeated_req_idx,
                                $need_array);

                if (!defined $block->ignore_response) {
                    check_access_log($block, $dry_run, $repeated_req_idx);
                }
            }

            $req_idx++;

            last if !$n;
        }
    }

    if ($block->wait) {
        sleep $block->wait;
    }

    check_error_log($block, $res, $dry_run, $repeated_req_idx, $need_array);

    if (!defined $block->ignore_response) {
        check_access_log($block, $dry_run, $repeated_req_idx);
    }
}

# ----------------------------------------------------------------------
# End of the test script
# ----------------------------------------------------------------------

END {
    if (!$InSubprocess) {
        local $?;

        cleanup();

        if (!$ENV{TEST_NGINX_NO_CLEAN} && defined $PidFile && -f $PidFile) {
            my $pid = do {
                open my $in, '<', $PidFile;
                my $p = $in ? <$in> : undef;
                close $in if $in;
                $p;
            };
            if (defined $pid) {
                chomp $pid;
                if ($pid =~ /^\d+$/ && is_running($pid)) {
                    kill_process($pid, 1, 'END');
                } else {
                    unlink $PidFile;
                }
            }
        }

        check_prev_block_shutdown_error_log();

        my $tb = Test::More->builder;
        if (!$tb->has_plan && !$DoneTesting && $tb->current_test > 0) {
            # no plan was given: finish as done_testing() would
            $tb->done_testing;
        }
    }
}

# ----------------------------------------------------------------------
# A minimal HTTP::Response replacement (parsing as HTTP::Response->parse)
# ----------------------------------------------------------------------

package Test::Nginx::StandIn::Response;

use strict;
use warnings;

sub new {
    my ($class, $code, $message, $content) = @_;
    return bless {
        protocol => undef,
        code     => $code,
        message  => $message,
        headers  => [],
        content  => defined $content ? $content : '',
    }, $class;
}

sub parse {
    my ($class, $str) = @_;

    $str = '' if !defined $str;

    my $status_line;
    if ($str =~ s/^(.*)\n//) {
        $status_line = $1;
    } else {
        $status_line = $str;
        $str = '';
    }
    $status_line =~ s/\r\z//;

    my @headers;
    while (1) {
        if ($str =~ s/^([^\s:]+)[ \t]*: ?(.*)\n?//) {
            my ($k, $v) = ($1, $2);
            $v =~ s/\r\z//;
            push @headers, [$k, $v];
        } elsif (@headers && $str =~ s/^([ \t].*)\n?//) {
            my $cont = $1;
            $headers[-1][1] .= "\n$cont";
            $headers[-1][1] =~ s/\r\z//;
        } else {
            $str =~ s/^\r?\n//;
            last;
        }
    }

    my ($protocol, $code, $message);
    if ($status_line =~ /^\d{3} /) {
        ($code, $message) = split ' ', $status_line, 2;
    } else {
        ($protocol, $code, $message) = split ' ', $status_line, 3;
    }

    my $self = $class->new($code, $message, $str);
    $self->{protocol} = $protocol;
    $self->{headers} = \@headers;
    return $self;
}

sub code {
    my $self = shift;
    $self->{code} = shift if @_;
    return $self->{code};
}

sub message { $_[0]->{message} }

sub protocol { $_[0]->{protocol} }

sub content {
    my $self = shift;
    $self->{content} = shift if @_;
    return $self->{content};
}

# All values of a header field (case-insensitive, "_" taken as "-" like
# HTTP::Headers does); joined with ", " in scalar context.
sub header {
    my ($self, $field) = @_;
    my $f = lc $field;
    $f =~ tr/_/-/ if $field !~ /^:/;
    my @vals = map { $_->[1] } grep { lc($_->[0]) eq $f } @{ $self->{headers} };
    return @vals if wantarray;
    return $vals[0] if @vals <= 1;
    return join ', ', @vals;
}

sub headers { @{ $_[0]->{headers} } }

package Test::Nginx::Socket;

1;

__END__

=head1 NAME

Test::Nginx::Socket - stand-in for the real Test::Nginx::Socket (subset)

=head1 DESCRIPTION

Used by C<prove -I t/standin -r t> only when OpenResty's Test::Nginx is
not installed.  Implements the subset of Test::Nginx::Socket used by this
project's tests with the real module's semantics and subtest counts.

Differences from the real module (on purpose):

=over

=item * nginx's stderr is appended to F<t/servroot/logs/error.log>, so
that start-up messages of nginx builds whose default error log is stderr
(Debian's) can be checked by C<--- error_log> (e.g. with C<--- must_die>).

=item * the temp paths (client_body, proxy, fastcgi, uwsgi, scgi) are set
inside the server root in the generated http {} block, unless the block's
http_config sets them.

=item * nginx start failures (other than a busy port) fail the block at
once instead of retrying for 30 seconds and bailing out; connection
attempts stop retrying as soon as the nginx process is gone. A later block
without C<--- config> (which would use that nginx) fails at once too.

=item * a C<--- init> that dies fails its block (whose requests are not
sent) instead of bailing out: the later blocks and files still run, and
the run still fails.

=item * C<TEST_NGINX_STANDIN_LISTEN_ADDR> (stand-in only) puts an address
in the generated C<listen> directive.

=item * not supported: the HUP reload mode, valgrind, systemtap, check
leak and benchmark modes, HTTP/2 and HTTP/3 (curl), C<tcp_listen> /
C<udp_listen> mock servers, C<--- curl>, C<--- stap*>.

=back

=cut
