#!/usr/bin/env perl
# scripts/check-dashboard.pl — checks the Grafana dashboard
# contrib/grafana/idempotency-dashboard.json: well-formed JSON; every panel
# with a unique id, a gridPos and the ${datasource} variable as its data
# source, its targets' refIds unique; every PromQL expression (panels and
# query variables, Grafana's variables given values) parsed by promtool
# (`promtool check rules` on a temporary rules file with one recording rule
# per expression); and every idempotency_* metric that the dashboard and
# contrib/prometheus/idempotency.rules.yml name served by the module
# (module/metrics.cpp). Run by `make rules-check`; prints each problem,
# non-zero if any.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use JSON::PP ();

chdir dirname(__FILE__) . '/..' or die "$!\n";
use lib 't/lib';
use Idem::Prometheus;

my $dashboard = 'contrib/grafana/idempotency-dashboard.json';
my $rules = 'contrib/prometheus/idempotency.rules.yml';
my @problems;

my $json = do { local (@ARGV, $/) = ($dashboard); <> };
my $d = JSON::PP->new->decode($json);    # dies, with the place, when not well-formed

my %vars = map { ($_->{name} => $_) } @{ $d->{templating}{list} // [] };
push @problems, "$dashboard: no Prometheus data source variable \"datasource\""
    unless ($vars{datasource}{type} // '') eq 'datasource' && ($vars{datasource}{query} // '') eq 'prometheus';
my %ids;
my @panels = @{ $d->{panels} // [] };
push @problems, "$dashboard: no panels" unless @panels;
while (my $p = shift @panels) {
    push @panels, @{ $p->{panels} // [] };
    my $name = "$dashboard: panel \"" . ($p->{title} // '?') . '"';
    push @problems, "$name: no id, or the id of another panel" if !defined $p->{id} || $ids{ $p->{id} }++;
    push @problems, "$name: no gridPos" unless ref $p->{gridPos} eq 'HASH';
    next if ($p->{type} // '') eq 'row';
    push @problems, "$name: its data source is not \${datasource}" unless ($p->{datasource}{uid} // '') eq '${datasource}';
    my %refs;
    push @problems, "$name: no targets" unless @{ $p->{targets} // [] };
    for my $t (@{ $p->{targets} // [] }) {
        push @problems, "$name: refId " . ($t->{refId} // 'missing') . ' twice or missing'
            if !defined $t->{refId} || $refs{ $t->{refId} }++;
    }
}

# Each expression as a recording rule, for promtool to parse.
my @exprs = Idem::Prometheus::dashboard_exprs($dashboard, job => 'idempotency', instance => '.+');
my $tmp = tempdir('check-dashboard-XXXXXX', TMPDIR => 1, CLEANUP => 1);
open my $fh, '>', "$tmp/dashboard.rules.yml" or die "$tmp: $!\n";
print {$fh} "groups:\n  - name: dashboard\n    rules:\n";
for my $i (0 .. $#exprs) {
    print {$fh} "      - record: dashboard_expr_$i\n        expr: " . JSON::PP->new->encode([ $exprs[$i]{expr} ]) =~ s/^\[|\]$//gr . "\n";
}
close $fh;
my $out = `promtool check rules $tmp/dashboard.rules.yml 2>&1`;
if ($? != 0) {
    $out =~ s/dashboard_expr_(\d+)/"$exprs[$1]{panel}" $exprs[$1]{refId}/g;
    push @problems, "$dashboard: promtool refuses an expression:\n$out";
}

# The metrics named exist.
my $served = do { local (@ARGV, $/) = ('module/metrics.cpp'); <> };
my %served = map { ($_ => 1) } $served =~ /"(idempotency_\w+)[" ]/g, $served =~ /# TYPE (idempotency_\w+) /g;
my $rules_text = do { local (@ARGV, $/) = ($rules); <> };
for my $where ([ $dashboard, join "\n", map { $_->{expr} } @exprs ], [ $rules, $rules_text ]) {
    my ($file, $text) = @$where;
    my %seen;
    for my $m ($text =~ /\b(idempotency_[a-z_]+)\b/g) {
        (my $base = $m) =~ s/_(bucket|sum|count)$//;
        next if $seen{$m}++ || $served{$m} || $served{$base};
        next if $m =~ /^idempotency_(wait|ttl|lock_ttl|redis_timeout|max_response_size|fail_open|zone|status|encrypt_key|release_statuses)$/;    # directives and variables named in the text
        push @problems, "$file: $m is not a metric the module serves";
    }
}

print "$_\n" for @problems;
printf "%s: %d panels, %d expressions parsed, metrics checked%s\n", $dashboard, scalar(keys %ids), scalar(@exprs),
    @problems ? ": FAILED" : '';
exit(@problems ? 1 : 0);
