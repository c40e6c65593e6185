#!/usr/bin/env perl
# bench-report.pl — the tables of scripts/bench.sh, from its results file.
#
#   bench-report.pl TABLE RESULTS PHASE CELL[@REF] ...
#
# RESULTS has one line per cell per round, tab-separated:
#   phase round cell rps p50_us p99_us requests gateway_us upstream_us
#   redis_us machine_busy_% machine_us steal_%
# (the CPU figures are per request). Every figure is the median over the
# rounds, with the min–max beside it. A ratio compares a cell with its
# reference REF (default plain) from the same phase of the same run, never
# with another run. TABLE:
#   cpu         CPU time per request per process (the primary table), with
#               the whole machine's figure as a ratio to REF's
#   throughput  requests/s, × REF, p50 and p99 latency, p99 added over REF
#   rounds      requests/s of every round, for the noise to be seen
#   steal       a note when the hypervisor took more than 10 % of the machine
#   perkb       CELL@REF pairs of the same mode at 256 KB and at 200 B:
#               (cost at 256 KB - cost at 200 B) / 255.8 per process, and
#               each mode's per-KB figure against the first pair's (plain)
#   workers     CELL@REF pairs, 2 gateway workers against 1: requests/s and
#               gateway CPU per request, and whether 2 are at least as fast
#   ratio       prints "CELL rps_ratio p99_added_ms" lines (for the targets)
use strict;
use warnings;
use utf8;
binmode STDOUT, ':encoding(UTF-8)';

my ($table, $file, $phase, @cells) = @ARGV;
die "usage: bench-report.pl TABLE RESULTS PHASE CELL[\@REF]...\n" unless $table && $file && $phase;

use constant { RPS => 3, P50 => 4, P99 => 5, GW => 7, UP => 8, REDIS => 9, BUSY => 10, MACHINE => 11, STEAL => 12 };
my (%v, %round);   # $v{cell}[column] = [values over rounds]; $round{r}{cell} = the line
open my $fh, '<', $file or die "$file: $!\n";
while (<$fh>) {
    chomp;
    my @f = split /\t/;
    next unless $f[0] eq $phase;
    push @{ $v{ $f[2] }[$_] }, $f[$_] for 3 .. $#f;
    $round{ $f[1] }{ $f[2] } = \@f;
}

sub med { my @s = sort { $a <=> $b } @_; @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2 }
sub medof { my ($c, $col) = @_; $v{$c} ? med(@{ $v{$c}[$col] }) : undef }
sub range {   # "median (min–max)" with FMT, or — when the process did nothing
    my ($c, $col, $fmt, $scale) = @_;
    my @s = sort { $a <=> $b } map { $_ / ($scale // 1) } @{ $v{$c}[$col] };
    return '—' if $s[-1] < 0.05;
    return sprintf "$fmt ($fmt–$fmt)", med(@s), $s[0], $s[-1];
}
sub ratio { my ($a, $b, $fmt) = @_; defined $a && defined $b && $b ? sprintf($fmt // '%.3f', $a / $b) : '—' }
my @pairs = map { my ($c, $r) = split /@/; [$c, $r // 'plain'] } @cells;
@pairs = grep { $v{ $_->[0] } } @pairs unless $table eq 'perkb' || $table eq 'workers';

if ($table eq 'cpu') {
    print "| cell | gateway worker µs | upstream worker µs | redis-server µs | whole machine µs | machine × ref | machine busy | stolen |\n";
    print "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (@pairs) {
        my ($c, $ref) = @$_;
        printf "| %s | %s | %s | %s | %s | %s | %.0f %% | %.0f %% |\n", $c,
            (map { range($c, $_, '%.1f') } GW, UP, REDIS, MACHINE),
            $c eq $ref ? '1' : ratio(medof($c, MACHINE), medof($ref, MACHINE), '%.2f') . " ($ref)",
            medof($c, BUSY), medof($c, STEAL);
    }
} elsif ($table eq 'throughput') {
    print "| cell | requests/s | × ref | p50 ms | p99 ms | p99 added over ref, ms |\n";
    print "|---|---:|---:|---:|---:|---:|\n";
    for (@pairs) {
        my ($c, $ref) = @$_;
        my $added = defined medof($ref, P99) ? sprintf('%+.2f', (medof($c, P99) - medof($ref, P99)) / 1000) : '—';
        printf "| %s | %s | %s | %s | %s | %s |\n", $c, range($c, RPS, '%.0f'),
            $c eq $ref ? '1' : ratio(medof($c, RPS), medof($ref, RPS)) . " ($ref)",
            range($c, P50, '%.2f', 1000), range($c, P99, '%.2f', 1000), $c eq $ref ? '—' : $added;
    }
} elsif ($table eq 'rounds') {
    my @c = map { $_->[0] } @pairs;
    for my $r (sort { $a <=> $b } keys %round) {
        print "round $r:";
        for my $c (@c) {
            my $f = $round{$r}{$c} or next;
            printf " %s %d (p99 %.2f ms, steal %d%%);", $c, $f->[RPS], $f->[P99] / 1000, $f->[STEAL] // 0;
        }
        print "\n";
    }
} elsif ($table eq 'steal') {
    my ($n, $bad) = (0, 0);
    for my $c (keys %v) { for (@{ $v{$c}[STEAL] }) { $n++; $bad++ if $_ > 10 } }
    print "\nNote: $bad of $n cell runs lost more than 10 % of the machine to the hypervisor (steal);",
          " they are in the medians and ranges.\n" if $bad;
} elsif ($table eq 'perkb') {
    print "| mode | gateway worker µs per KB | redis-server µs per KB | whole machine µs per KB | gateway × plain per KB | machine × plain per KB | within 1.5 × plain (machine) |\n";
    print "|---|---:|---:|---:|---:|---:|---|\n";
    my @base;
    for (@pairs) {
        my ($big, $small) = @$_;
        next unless $v{$big} && $v{$small};
        my @kb = map { (medof($big, $_) - medof($small, $_)) / 255.8 } GW, REDIS, MACHINE;
        @base = @kb unless @base;
        (my $mode = $big) =~ s/-[^-]*$//;
        my ($rg, $rm) = (ratio($kb[0], $base[0], '%.2f'), ratio($kb[2], $base[2], '%.2f'));
        printf "| %s | %.3f | %.3f | %.3f | %s | %s | %s |\n", $mode, @kb, $rg, $rm,
            $mode eq 'plain' ? '—' : $rm ne '—' && $rm <= 1.5 ? 'met' : 'not met';
    }
} elsif ($table eq 'workers') {
    print "| cell | requests/s, 1 worker | requests/s, 2 workers | 2 ÷ 1 | gateway workers µs per request, 1 → 2 | 2 workers at least as fast |\n";
    print "|---|---:|---:|---:|---:|---|\n";
    for (@pairs) {
        my ($two, $one) = @$_;
        next unless $v{$two} && $v{$one};
        my $r = medof($two, RPS) / medof($one, RPS);
        printf "| %s | %s | %s | %.3f | %.1f → %.1f | %s |\n", $one, range($one, RPS, '%.0f'), range($two, RPS, '%.0f'),
            $r, medof($one, GW), medof($two, GW), $r >= 1 ? 'yes' : 'no';
    }
} elsif ($table eq 'ratio') {
    for (@pairs) {
        my ($c, $ref) = @$_;
        next unless $v{$ref};
        printf "%s %.4f %.4f\n", $c, medof($c, RPS) / medof($ref, RPS), (medof($c, P99) - medof($ref, P99)) / 1000;
    }
} else {
    die "bench-report.pl: unknown table $table\n";
}
