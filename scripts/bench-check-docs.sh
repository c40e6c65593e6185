#!/usr/bin/env bash
# bench-check-docs.sh — the benchmark's blocks in the documentation and the
# names the benchmark scripts write agree (part of make doc-check):
#   - the names written: every `doc_block NAME` and `cells_block NAME` with a
#     literal NAME in scripts/*.sh (bench.sh's report, instructions.sh,
#     bench-zone-lock.sh);
#   - every <!-- bench:begin NAME --> / <!-- bench:end NAME --> line in
#     README.md, docs/*.md and t/README.md names one of them, each NAME once,
#     begin before end, no block inside another;
#   - every name written has its block in docs/performance.md, and
#     scripts/bench-docs.pl, run on a scratch copy with a dummy table for
#     each name, finds its markers and replaces exactly what lies between
#     them, nothing else.
# Non-zero on any mismatch, each printed. Starts no process but perl.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/performance.md
scratch=$(mktemp -d "${TMPDIR:-/tmp}/bench-check-docs-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

written=$(perl -ne 'print "$1\n" while /\b(?:doc_block|cells_block)\s+([a-z][a-z0-9-]*)\b/g' scripts/*.sh | sort -u)
[ -n "$written" ] || { echo "bench-check-docs: no doc_block NAME in scripts/*.sh" >&2; exit 1; }

status=0
perl -e '
    my %written = map { $_ => 1 } split /\s+/, shift;
    my $bad = 0;
    for my $file (@ARGV) {
        open my $fh, "<", $file or die "$file: $!\n";
        my ($open, %seen);
        while (<$fh>) {
            next unless /^\s*<!--\s*bench:(begin|end)\s+(\S+)\s*-->\s*$/;   # a marker line, as bench-docs.pl reads them
            my ($what, $name) = ($1, $2);
            my $at = "$file:$.";
            if (!$written{$name}) { print "$at: block $name: no benchmark script writes it\n"; $bad++ }
            if ($what eq "begin") {
                if (defined $open) { print "$at: block $name begins inside block $open\n"; $bad++ }
                if ($seen{$name}++) { print "$at: block $name a second time\n"; $bad++ }
                $open = $name;
            } else {
                if (!defined $open || $open ne $name) { print "$at: bench:end $name without its begin\n"; $bad++ }
                undef $open;
            }
        }
        if (defined $open) { print "$file: block $open has no end\n"; $bad++ }
    }
    exit($bad ? 1 : 0);
' "$written" README.md docs/*.md t/README.md || status=1

cp "$doc" "$scratch/performance.md"
for name in $written; do
    printf '| dummy | %s |\n|---|---|\n| 1 | 2 |\n' "$name" >"$scratch/table.md"
    cp "$scratch/performance.md" "$scratch/before.md"
    out=$(perl scripts/bench-docs.pl --doc "$scratch/performance.md" "$name" "$scratch/table.md" 2>&1) || true
    perl -e '
        my ($name, $before, $after, $table, $out) = @ARGV;
        sub slurp { open my $f, "<", $_[0] or die "$_[0]: $!\n"; local $/; <$f> }
        my ($b, $a, $t) = map { slurp($_) } $before, $after, $table;
        my $re = qr/(^[ \t]*<!--[ \t]*bench:begin[ \t]+\Q$name\E[ \t]*-->[ \t]*\n)(.*?)(^[ \t]*<!--[ \t]*bench:end[ \t]+\Q$name\E[ \t]*-->[ \t]*$)/ms;
        my @n = $a =~ /^[ \t]*<!--[ \t]*bench:begin[ \t]+\Q$name\E[ \t]*-->/mg;
        if (@n != 1) { print "$name: bench-docs.pl: ", scalar(@n), " begin markers in docs/performance.md ($out)\n"; exit 1 }
        my @m = $a =~ $re or do { print "$name: no block after bench-docs.pl ($out)\n"; exit 1 };
        my $inside = $m[1];
        if ($inside ne $t) { print "$name: bench-docs.pl did not put the table between the markers ($out)\n"; exit 1 }
        (my $ra = $a) =~ s/$re/$1$3/; (my $rb = $b) =~ s/$re/$1$3/;
        if ($ra ne $rb) { print "$name: bench-docs.pl changed the page outside the block\n"; exit 1 }
    ' "$name" "$scratch/before.md" "$scratch/performance.md" "$scratch/table.md" "$out" || status=1
done
[ "$status" = 0 ] && echo "bench-check-docs: $(echo $written | wc -w) blocks, each written by a script and found once in $doc: $(echo $written)"
exit "$status"
