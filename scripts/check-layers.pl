#!/usr/bin/env perl
# scripts/check-layers.pl — checks that every #include "..." of module/ goes
# down or sideways, never up, by the layer table of docs/design.md#layers:
#   0 core     pure C++, no nginx (unit-tested)
#   1 base     nginx helpers shared by everything above
#   2 store    the store interface (one part per concern)
#   3 backend  redis/ and zone/ (neither includes the other)
#   4 factory  which backend a location uses
#   5 request  the request's handlers, filters and the module itself
# Run by `make unit`; prints each offending include, non-zero if any.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Find;

chdir dirname(__FILE__) . '/..' or die "$!\n";

my @names = qw(core base store backend factory request);
my %layer;
$layer{$_} = 0 for qw(disposition upstream_control claim_token inspect key fingerprint record replayable compression pieces big_endian record_bytes live_log sse outcome decide seal lease timing
                      redis/resp redis/reply_reader redis/retry redis/info redis/cluster
                      redis/tls_reason redis/replies redis/hiredis_api zone/zone_rules);
$layer{$_} = 1 for qw(ngx conf conf_util log_limit owned_args metrics module_zone live_board send);
$layer{$_} = 2 for qw(store store_call);
$layer{store_factory} = 4;

# The layer of module/NAME (NAME without .hpp/.cpp).
sub layer_of {
    my ($name) = @_;
    return $layer{$name} if exists $layer{$name};
    return 3 if $name =~ m{^(redis|zone)/};
    return 5;
}

my @files;
find(sub { push @files, $File::Find::name if /\.(cpp|hpp)$/ }, 'module');

my $bad = 0;
for my $file (sort @files) {
    (my $self = $file) =~ s{^module/|\.(cpp|hpp)$}{}g;
    my $dir = $self =~ m{^(.*)/} ? $1 : '';
    my $mine = layer_of($self);
    open my $fh, '<', $file or die "$file: $!\n";
    while (my $line = <$fh>) {
        if ($mine == 0 && $line =~ /^\s*#\s*include\s*<ngx_/) {
            print STDERR "$file:$.: core includes an nginx header (docs/design.md#layers)\n";
            $bad = 1;
        }
        next unless $line =~ /^\s*#\s*include\s*"([^"]+)"/;
        my $inc = $1;
        # from the file's own directory, else from module/ (-Imodule);
        # module/ is one directory deep
        my $target = $dir ne '' && $inc =~ m{^\.\./(.*)} ? $1
                   : $dir ne '' && -e "module/$dir/$inc" ? "$dir/$inc"
                   : $inc;
        $target =~ s/\.(cpp|hpp)$//;
        my $theirs = layer_of($target);
        my $why = $theirs > $mine ? "$names[$mine] includes $names[$theirs]"
                : $mine == 3 && $theirs == 3 && (split m{/}, $self)[0] ne (split m{/}, $target)[0]
                    ? 'one backend includes the other'
                : undef;
        next unless $why;
        print STDERR "$file:$.: #include \"$inc\": $why (docs/design.md#layers)\n";
        $bad = 1;
    }
    close $fh;
}
print "layers: every include goes down or sideways\n" unless $bad;
exit $bad;
