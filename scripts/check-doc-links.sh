#!/usr/bin/env bash
# check-doc-links.sh — every relative link in the documentation resolves:
# README.md, docs/*.md, t/README.md and model/README.md (or the files named as arguments).
# A link [text](path), [text](path#anchor) or [text](#anchor) must name a
# file or directory that exists, relative to the page, and an anchor must be
# a heading of the target page (its GitHub slug: lower case, punctuation
# other than - and _ dropped, spaces as -, -1, -2 ... for repeats) or an
# explicit <a id="...">. Links to other sites (scheme:) are not followed;
# fenced code blocks and inline code are skipped. Then every directive of
# the module's command tables (module/, `directive(ngx_string("NAME")` or
# `{ngx_string("NAME"), NGX_HTTP_...`) must have its entry in
# docs/directives.md: a `### NAME` heading followed by Syntax:, Default: and
# Context: lines (but for idempotency_test_*: a test build's, never a
# release's, module/test_hooks.hpp). Non-zero on any dead link or missing
# entry, each printed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  set -- README.md docs/*.md t/README.md model/README.md
fi
status=0
perl -CSD -e '
use strict; use warnings; use utf8;
use File::Basename qw(dirname);
use File::Spec;
my %anchors;                     # file => { anchor => 1 }
sub strip_code { my ($l) = @_; $l =~ s/`[^`]*`//g; $l }
sub anchors_of {
    my ($file) = @_;
    return $anchors{$file} if $anchors{$file};
    my %a; my %seen; my $fence = 0;
    open my $fh, "<", $file or die "$file: $!\n";
    while (my $l = <$fh>) {
        if ($l =~ /^\s*(```|~~~)/) { $fence = !$fence; next }
        next if $fence;
        $a{$1} = 1 while $l =~ /<a\s+(?:id|name)="([^"]+)"/g;
        next unless $l =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
        my $slug = lc $1;
        $slug =~ s/<[^>]*>//g;                  # html tags
        $slug =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;  # links keep their text
        $slug =~ s/[^\p{L}\p{N}\s_-]//g;        # punctuation, backquotes included
        $slug =~ s/ /-/g;
        my $n = $seen{$slug}++;
        $a{$n ? "$slug-$n" : $slug} = 1;
    }
    return $anchors{$file} = \%a;
}
my $dead = 0; my $links = 0;
for my $file (@ARGV) {
    open my $fh, "<", $file or die "$file: $!\n";
    my $fence = 0;
    while (my $l = <$fh>) {
        my $ln = $.;
        if ($l =~ /^\s*(```|~~~)/) { $fence = !$fence; next }
        next if $fence || $l =~ /^(    |\t)/;
        my $text = strip_code($l);
        while ($text =~ /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g) {
            my $target = $1;
            next if $target =~ /^[a-z][a-z0-9+.-]*:/i;   # http:, https:, mailto:
            $links++;
            my ($path, $anchor) = split /#/, $target, 2;
            my $dest = $path eq "" ? $file : File::Spec->catfile(dirname($file), $path);
            if (!-e $dest) { print "$file:$ln: $target: no such file\n"; $dead++; next }
            next unless defined $anchor && length $anchor;
            if (-d $dest || $dest !~ /\.md$/) { print "$file:$ln: $target: an anchor in a file that is not Markdown\n"; $dead++; next }
            next if anchors_of($dest)->{$anchor};
            print "$file:$ln: $target: no heading with this anchor\n"; $dead++;
        }
    }
}
print "check-doc-links: $links relative links in ", scalar(@ARGV), " files, $dead dead\n";
exit($dead ? 1 : 0);
' -- "$@" || status=1

missing=0 total=0
for name in $(grep -rhoE '(directive\(|\{)ngx_string\("[a-z_]+"\)' module/ | sed -E 's/.*"([a-z_]+)".*/\1/' \
              | grep -v '^idempotency_test_' | sort -u); do
  total=$((total + 1))
  if ! awk -v h="### $name" '
        $0 == h { found = 1; next }
        found && /^#/ { exit }
        found && /^ *Syntax: / { s = 1 } found && /^ *Default: / { d = 1 } found && /^ *Context: / { c = 1 }
        END { exit !(s && d && c) }' docs/directives.md; then
    echo "docs/directives.md: no entry (### $name with Syntax:, Default:, Context:) for the directive $name"
    missing=$((missing + 1))
  fi
done
echo "check-doc-links: $total directives in module/, $missing without an entry in docs/directives.md"
[ "$total" -gt 0 ] && [ "$missing" -eq 0 ] || status=1
exit $status
