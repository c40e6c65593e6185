package Test::Nginx::StandIn::Block;

# Private helper of the Test::Nginx::Socket stand-in (see ../Socket.pm).
#
# A small re-implementation of the parts of Test::Base that
# Test::Nginx::Socket relies on: splitting the __DATA__ spec into
# "=== name" blocks and "--- section" sections, the block objects with
# their accessors and set_value(), and the section filters (the default
# "norm trim" filters plus eval, chomp, chop, ...).

use strict;
use warnings;

use Carp ();

our $AUTOLOAD;

# Arguments of the filter being run ("--- foo join=," gives ",").
our $FilterArgs;

# Names that cannot be used as section names (they are methods here).
my %Reserved = map { $_ => 1 } qw(
    new set_value name description seq_num is_filtered run_filters
    original_values AUTOLOAD DESTROY can isa VERSION DOES
);

# Filters applied to every section before the section's own ones.
our @DefaultFilters = qw(norm trim);

# ----------------------------------------------------------------------
# Block objects
# ----------------------------------------------------------------------

sub new {
    my $class = shift;
    return bless {
        _section_order   => [],
        _section_map     => {},
        _original_values => {},
        _seq_num         => undef,
        _is_filtered     => 0,
    }, $class;
}

sub set_value {
    my $self = shift;
    my $key = shift;
    $self->{$key} = [@_];
    return;
}

sub _values {
    my ($self, $key) = @_;
    my @list = @{ $self->{$key} || [] };
    return wantarray ? @list : $list[0];
}

sub name {
    my $self = shift;
    Carp::croak("Not allowed to set values for 'name'") if @_;
    return $self->_values('name');
}

sub description {
    my $self = shift;
    Carp::croak("Not allowed to set values for 'description'") if @_;
    return $self->_values('description');
}

sub seq_num {
    my $self = shift;
    $self->{_seq_num} = shift if @_;
    return $self->{_seq_num};
}

sub is_filtered {
    my $self = shift;
    $self->{_is_filtered} = shift if @_;
    return $self->{_is_filtered};
}

sub original_values { return $_[0]->{_original_values} }

sub DESTROY { }

# Any other method name is a section accessor: the list of values in list
# context, the first value in scalar context, nothing for absent sections.
sub AUTOLOAD {
    my $self = shift;
    (my $key = $AUTOLOAD) =~ s/.*:://;
    return if !ref $self;
    return if !exists $self->{$key};
    Carp::croak("Not allowed to set values for '$key'") if @_;
    my @list = @{ $self->{$key} || [] };
    return wantarray ? @list : $list[0];
}

# ----------------------------------------------------------------------
# Spec parsing
# ----------------------------------------------------------------------

# Returns the list of blocks of a spec text, honouring the ONLY, SKIP and
# LAST meta sections the way Test::Base does.
sub parse_spec {
    my ($class, $spec) = @_;

    $spec = '' if !defined $spec;

    my @hunks = ($spec =~ /^(===.*?(?=^===|\z))/msg);

    my @blocks;
    for my $hunk (@hunks) {
        my $block = $class->_make_block($hunk);

        if (exists $block->{ONLY}) {
            Test::More::diag("I found ONLY: maybe you're debugging?");
            @blocks = ($block);
            last;
        }

        next if exists $block->{SKIP};

        push @blocks, $block;

        last if exists $block->{LAST};
    }

    my $seq = 1;
    $_->seq_num($seq++) for @blocks;

    return @blocks;
}

sub _make_block {
    my ($class, $hunk) = @_;

    my $block = $class->new;

    $hunk =~ s/\A===[ \t]*(.*)\s+// or die "bad block: $hunk";
    my $name = $1;

    my @parts = split /^--- +\(?(\w+)\)? *(.*)?\n/m, $hunk;

    my $description = shift @parts;
    $description = '' if !defined $description;
    $description = $name if $description !~ /\S/;
    $description =~ s/\s*\z//;
    $block->set_value(description => $description);

    while (@parts) {
        my ($type, $filters, $value) = splice @parts, 0, 3;

        if ($Reserved{$type} || $type =~ /^_/) {
            Carp::croak("'$type' is a reserved name. Use something else.\n");
        }

        $value = '' if !defined $value;
        $filters = '' if !defined $filters;

        # one-liner: "--- name: value" (or "--- name filters: value")
        if ($filters =~ /:(\s|\z)/) {
            Carp::croak("Extra lines not allowed in '$type' section")
                if $value =~ /\S/;
            ($filters, $value) = split /\s*:(?:\s+|\z)/, $filters, 2;
            $value = '' if !defined $value;
            $value =~ s/^\s*(.*?)\s*$/$1/;
        }

        $block->{_section_map}{$type} = { filters => $filters };
        push @{ $block->{_section_order} }, $type;
        $block->set_value($type, $value);
    }

    $block->set_value(name => $name);

    return $block;
}

# ----------------------------------------------------------------------
# Filters
# ----------------------------------------------------------------------

sub _filter_list {
    my ($string) = @_;

    $string = '' if !defined $string;
    $string =~ s/^\s+//;

    my (@filters, @append);
    for my $filter (@DefaultFilters, split /\s+/, $string) {
        last if !length $filter;
        if ($filter =~ s/^-//) {
            @filters = grep { $_ ne $filter } @filters;

        } elsif ($filter =~ s/^\+//) {
            push @append, $filter;

        } else {
            push @filters, $filter;
        }
    }

    return (@filters, @append);
}

sub run_filters {
    my $self = shift;

    Carp::croak("Attempt to filter a block twice") if $self->{_is_filtered};

    for my $type (@{ $self->{_section_order} }) {
        my $filters = $self->{_section_map}{$type}{filters};
        my @value = @{ $self->{$type} || [] };
        $self->{_original_values}{$type} = $value[0];

        for my $spec (_filter_list($filters)) {
            my $filter = $spec;
            local $FilterArgs = $filter =~ s/=(.*)$// ? $1 : undef;

            no strict 'refs';
            if (defined &{"main::$filter"}) {
                # a user-defined filter in the test script
                local $_ = (@value == 1 && !defined $value[0])
                           ? undef : join '', @value;
                @value = &{"main::$filter"}(@value);
                if (!@value
                    || (@value == 1 && defined $value[0]
                        && $value[0] =~ /\A(\d+|)\z/))
                {
                    @value = ($_);
                }

            } else {
                my $code = __PACKAGE__->can("filter_$filter");
                die "Can't find a function or method for '$filter' filter\n"
                    if !$code;
                @value = $code->($self, @value);
            }

            # set after each filter since later filters may introspect
            $self->set_value($type, @value);
        }
    }

    $self->{_is_filtered} = 1;
    return;
}

sub _filter_args {
    my $args = $FilterArgs;
    return undef if !defined $args;
    $args =~ s/(\\s)/ /g;
    $args =~ s/(\\[a-z])/'"' . $1 . '"'/gee;
    return $args;
}

sub _assert_scalar {
    my $name = shift;
    return if @_ == 1;
    Carp::croak("Input to the '$name' filter must be a scalar, not a list");
}

sub filter_norm {
    my $self = shift;
    _assert_scalar('norm', @_);
    my $text = shift;
    $text = '' if !defined $text;
    $text =~ s/\015\012/\n/g;
    $text =~ s/\r/\n/g;
    return $text;
}

sub filter_trim {
    my $self = shift;
    return map {
        my $v = $_;
        if (defined $v) {
            $v =~ s/\A([ \t]*\n)+//;
            $v =~ s/(?<=\n)\s*\z//g;
        }
        $v;
    } @_;
}

sub filter_chomp {
    my $self = shift;
    return map { my $v = $_; CORE::chomp($v) if defined $v; $v } @_;
}

sub filter_chop {
    my $self = shift;
    return map { my $v = $_; CORE::chop($v) if defined $v; $v } @_;
}

sub filter_unchomp {
    my $self = shift;
    return map { $_ . "\n" } @_;
}

sub filter_eval {
    my $self = shift;
    _assert_scalar('eval', @_);
    my @return = Test::Nginx::StandIn::Block::Eval::run(shift);
    if ($@) {
        my $err = $@;
        # Test::Base silently uses the error text as the value; say it too.
        warn "WARNING: eval filter failed in block \"",
             (defined $self->name ? $self->name : '?'), "\": $err";
        return $err;
    }
    return @return;
}

sub filter_escape {
    my $self = shift;
    _assert_scalar('escape', @_);
    my $text = shift;
    $text =~ s/(\\.)/eval "qq{$1}"/ge;
    return $text;
}

sub filter_lines {
    my $self = shift;
    _assert_scalar('lines', @_);
    my $text = shift;
    return () if !length $text;
    return ($text =~ /^(.*\n?)/gm);
}

sub filter_join {
    my $self = shift;
    my $sep = _filter_args();
    $sep = '' if !defined $sep;
    return CORE::join($sep, @_);
}

sub filter_split {
    my $self = shift;
    _assert_scalar('split', @_);
    my $sep = _filter_args();
    if (defined $sep && $sep =~ s{^/(.*)/$}{$1}) {
        $sep = qr{$sep};
    }
    $sep = qr/\s+/ if !$sep;
    return CORE::split($sep, shift);
}

sub filter_array {
    my $self = shift;
    return [@_];
}

sub filter_hash {
    my $self = shift;
    return +{@_};
}

sub filter_append {
    my $self = shift;
    my $suffix = _filter_args();
    $suffix = '' if !defined $suffix;
    return map { $_ . $suffix } @_;
}

sub filter_prepend {
    my $self = shift;
    my $prefix = _filter_args();
    $prefix = '' if !defined $prefix;
    return map { $prefix . $_ } @_;
}

sub filter_reverse {
    my $self = shift;
    return CORE::reverse(@_);
}

sub filter_sort {
    my $self = shift;
    return CORE::sort(@_);
}

sub filter_head {
    my $self = shift;
    my $size = _filter_args() || 1;
    return splice(@_, 0, $size);
}

sub filter_tail {
    my $self = shift;
    my $size = _filter_args() || 1;
    return splice(@_, @_ - $size, $size);
}

sub filter_regexp {
    my $self = shift;
    _assert_scalar('regexp', @_);
    my $text = shift;
    my $flags = _filter_args();
    if ($text =~ /\n.*?\n/s) {
        $flags = 'xism' if !defined $flags;
    } else {
        CORE::chomp($text);
    }
    $flags ||= '';
    my $re = eval "qr{$text}$flags";
    die $@ if $@;
    return $re;
}

sub filter_base64_decode {
    my $self = shift;
    _assert_scalar('base64_decode', @_);
    require MIME::Base64;
    return MIME::Base64::decode_base64(shift);
}

sub filter_base64_encode {
    my $self = shift;
    _assert_scalar('base64_encode', @_);
    require MIME::Base64;
    return MIME::Base64::encode_base64(shift);
}

sub filter_flatten {
    my $self = shift;
    _assert_scalar('flatten', @_);
    my $ref = shift;
    if (ref $ref eq 'HASH') {
        return map { ($_, $ref->{$_}) } sort keys %$ref;
    }
    if (ref $ref eq 'ARRAY') {
        return @$ref;
    }
    die "Can only flatten a hash or array ref";
}

sub filter_dumper {
    my $self = shift;
    require Data::Dumper;
    no warnings 'once';
    local $Data::Dumper::Sortkeys = 1;
    local $Data::Dumper::Indent = 1;
    local $Data::Dumper::Terse = 1;
    return Data::Dumper::Dumper(@_);
}

# ----------------------------------------------------------------------
# The "eval" filter runs the section text as Perl code, like Test::Base's
# filter does: in its own package, under strict and warnings.
# ----------------------------------------------------------------------

package Test::Nginx::StandIn::Block::Eval;

use strict;
use warnings;

sub run {
    return CORE::eval($_[0]);
}

1;
