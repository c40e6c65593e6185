#!/usr/bin/env perl
# bench-docs.pl — puts a table the benchmark measured into the documentation.
#
#   scripts/bench-docs.pl [--doc FILE] NAME TABLE_FILE
#
# Replaces what lies between the lines
#   <!-- bench:begin NAME -->
#   <!-- bench:end NAME -->
# of FILE (default docs/performance.md) with the text of TABLE_FILE; the
# marker lines stay, nothing else in FILE changes. NAME: letters, digits and
# dashes. When FILE is missing, or has no such pair of markers (or more than
# one, or the end before the begin), FILE is left alone and a warning goes
# to stderr; the exit status is then 0 all the same (a missing block is not
# a failed benchmark), and 2 only for wrong arguments or an unreadable
# TABLE_FILE. FILE is replaced in one rename.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Temp qw(tempfile);

my $doc = dirname(__FILE__) . '/../docs/performance.md';
if (@ARGV && $ARGV[0] eq '--doc') { shift; $doc = shift // '' }
my ($name, $table_file) = @ARGV;
sub usage { print STDERR "usage: bench-docs.pl [--doc FILE] NAME TABLE_FILE\n"; exit 2 }
usage() unless @ARGV == 2 && length $doc && $name =~ /^[A-Za-z0-9][A-Za-z0-9-]*$/;

open my $tf, '<', $table_file or do { print STDERR "bench-docs.pl: $table_file: $!\n"; exit 2 };
my $table = do { local $/; <$tf> } // '';
close $tf;
$table .= "\n" if length $table && $table !~ /\n\z/;

sub warn_skip { print STDERR "bench-docs.pl: warning: $_[0]; $doc left alone\n"; exit 0 }

open my $df, '<', $doc or warn_skip("cannot read $doc ($!)");
my @lines = <$df>;
close $df;

my $begin_re = qr/^\s*<!--\s*bench:begin\s+\Q$name\E\s*-->\s*$/;
my $end_re   = qr/^\s*<!--\s*bench:end\s+\Q$name\E\s*-->\s*$/;
my @begin = grep { $lines[$_] =~ $begin_re } 0 .. $#lines;
my @end   = grep { $lines[$_] =~ $end_re } 0 .. $#lines;
warn_skip("no <!-- bench:begin $name --> and <!-- bench:end $name --> lines in $doc") unless @begin || @end;
warn_skip("the markers of $name are not one begin line then one end line in $doc")
    unless @begin == 1 && @end == 1 && $begin[0] < $end[0];

my $new = join '', @lines[0 .. $begin[0]], $table, @lines[$end[0] .. $#lines];
exit 0 if $new eq join '', @lines;

my ($out, $tmp) = tempfile('.performance-XXXXXX', DIR => dirname($doc));
print {$out} $new or die "bench-docs.pl: $tmp: $!\n";
close $out or die "bench-docs.pl: $tmp: $!\n";
chmod((stat $doc)[2] & 07777, $tmp);
rename $tmp, $doc or do { unlink $tmp; die "bench-docs.pl: rename to $doc: $!\n" };
print "bench-docs.pl: $name written to $doc\n";
