#!/usr/bin/env perl
# scripts/check-layers.pl — checks that nothing in module/ runs up a floor,
# by the floor table of docs/design.md#layers (read from that page, so the
# page and the check cannot disagree):
#   - every file of module/ has its floor in the table;
#   - every #include "..." goes down or sideways; the one exception is the
#     request's context, request_ctx.hpp, which holds its parts by value and
#     so includes their headers (as nginx's request holds its modules' parts);
#   - a core file includes no nginx header; one backend never includes the
#     other;
#   - with --calls DIR (nginx's objs/addon of a built module): every symbol
#     of the module an object file uses is defined by an object of its own
#     floor or a lower one (nm's undefined symbols against the defined ones).
#
#   scripts/check-layers.pl [--root DIR] [--design FILE] [--calls OBJDIR]
# --root: the tree whose module/ is checked (default: this repository);
# --design: the page with the table (default: ROOT/docs/design.md).
# Prints each offence, non-zero if any.
use strict;
use warnings;
use File::Basename qw(dirname basename);
use File::Find;
use Getopt::Long;

my $root = dirname(__FILE__) . '/..';
my ($design, $calls);
GetOptions('root=s' => \$root, 'design=s' => \$design, 'calls=s' => \$calls)
    or die "usage: $0 [--root DIR] [--design FILE] [--calls OBJDIR]\n";
$design //= "$root/docs/design.md";
chdir $root or die "$root: $!\n";

# The table: | N name | `file`, `dir/file`, the rest of `dir/` | what |
my (%floor, %rest, @names);
open my $dh, '<', $design or die "$design: $!\n";
my $in = 0;
while (my $line = <$dh>) {
    $in = 1 if $line =~ /^## Layers\b/;
    next unless $in;
    last if $in && $line =~ /^## / && $line !~ /^## Layers\b/;
    next unless $line =~ /^\|\s*(\d+)\s+([^|]+?)\s*\|([^|]*)\|/;
    my ($n, $name, $cell) = ($1, $2, $3);
    $names[$n] = $name;
    $rest{$1} = $n while $cell =~ /the rest of `([^`]+)\/`/g;
    (my $listed = $cell) =~ s/the rest of `[^`]+\/`//g;
    while ($listed =~ /`([^`]+)`/g) {
        (my $file = $1) =~ s/\.(cpp|hpp)$//;
        $floor{$file} = $n;
    }
}
close $dh;
die "$design: no floor table under \"## Layers\"\n" unless %floor;

my $bad = 0;
sub offence { print STDERR "$_[0] (docs/design.md#layers)\n"; $bad = 1; }

sub floor_of {
    my ($name) = @_;
    return $floor{$name} if exists $floor{$name};
    return $rest{$1} if $name =~ m{^(.*)/} && exists $rest{$1};
    return undef;
}

my @files;
find(sub { push @files, $File::Find::name if /\.(cpp|hpp)$/ }, 'module');
my %missing;
for my $file (sort @files) {
    (my $self = $file) =~ s{^module/|\.(cpp|hpp)$}{}g;
    my $mine = floor_of($self);
    unless (defined $mine) {
        offence("$file: in no floor of the table") unless $missing{$self}++;
        next;
    }
    my $dir = $self =~ m{^(.*)/} ? $1 : '';
    open my $fh, '<', $file or die "$file: $!\n";
    while (my $line = <$fh>) {
        offence("$file:$.: core includes an nginx header")
            if $mine == 0 && $line =~ /^\s*#\s*include\s*<ngx_/;
        next unless $line =~ /^\s*#\s*include\s*"([^"]+)"/;
        my $inc = $1;
        my $target = $dir ne '' && $inc =~ m{^\.\./(.*)} ? $1
                   : $dir ne '' && -e "module/$dir/$inc" ? "$dir/$inc"
                   : $inc;
        $target =~ s/\.(cpp|hpp)$//;
        my $theirs = floor_of($target);
        next unless defined $theirs;    # reported as a file of its own
        next if $self eq 'request_ctx' && $file =~ /\.hpp$/ && $inc =~ /\.hpp$/
             && $theirs >= $floor{request_ctx};
        my $why = $theirs > $mine ? "$names[$mine] includes $names[$theirs]"
                : $mine == 3 && $theirs == 3 && (split m{/}, $self)[0] ne (split m{/}, $target)[0]
                    ? 'one backend includes the other'
                : undef;
        offence("$file:$.: #include \"$inc\": $why") if $why;
    }
    close $fh;
}

# Calls: nginx puts module/NAME.cpp at OBJDIR/module/NAME.o and
# module/DIR/NAME.cpp at OBJDIR/DIR/NAME.o.
if (defined $calls) {
    my (%defined_in, %object_of);
    for my $file (grep { /\.cpp$/ } @files) {
        (my $self = $file) =~ s{^module/|\.cpp$}{}g;
        my $o = $self =~ m{/} ? "$calls/$self.o" : "$calls/module/$self.o";
        -e $o or die "$o: not built (make the module first)\n";
        $object_of{$self} = $o;
        # strong definitions only: text, data, bss, read-only data; an
        # inline function or a template (weak) belongs to its header
        for (`nm -C --defined-only '$o'`) {
            $defined_in{$1}{$self} = 1 if /^\S+ [TDBR] (.+)$/;
        }
    }
    for my $self (sort keys %object_of) {
        my $mine = floor_of($self);
        next unless defined $mine;
        for (`nm -C -u '$object_of{$self}'`) {
            next unless /^\s+U (.+)$/;
            my $sym = $1;
            # the module's descriptor, defined by module.cpp, is how every
            # file finds its context and configuration (nginx's own pattern)
            next if $sym eq 'ngx_http_idempotency_module';
            for my $owner (keys %{ $defined_in{$sym} || {} }) {
                my $theirs = floor_of($owner);
                my $why = $theirs > $mine ? "$names[$mine] calls $names[$theirs]"
                        : $mine == 3 && $theirs == 3 && (split m{/}, $self)[0] ne (split m{/}, $owner)[0]
                            ? 'one backend calls the other'
                        : undef;
                offence("module/$self.cpp calls $sym of module/$owner.cpp: $why") if $why;
            }
        }
    }
}

print "layers: every include", (defined $calls ? ' and call' : ''), " goes down or sideways\n" unless $bad;
exit $bad;
