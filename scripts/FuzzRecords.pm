# FuzzRecords.pm — the stored formats as scripts/fuzz-gateway.pl sees them:
# where each field of a record, a piece, a live log and a sealed envelope
# lies (to mutate it by name), a decoder of plain responses (the oracle a
# replay is checked against), and the mutations themselves. Core Perl
# only. The layouts are module/record.hpp's, compression.hpp's,
# pieces.hpp's, live_log.hpp's and seal.hpp's; this file reads them from
# outside, as any store client could, and trusts nothing it reads.
#
#   use FuzzRecords;
#   my @f = FuzzRecords::fields($bytes);         # [offset, size, name], ...
#   my $r = FuzzRecords::decode_response($bytes); # undef unless a plain response (v1/v2)
#   my ($out, $what) = FuzzRecords::mutate_bytes($bytes, $rng, \@others);
#   my ($out, $what) = FuzzRecords::mutate_field($bytes, $rng);
#
# $rng is a code ref: $rng->($n) gives an integer in [0, $n).
package FuzzRecords;

use strict;
use warnings;

use constant {
    PREFIX       => 37,    # "IDM" version kind fingerprint(32)
    MAX_WALK     => 4096,  # headers, pieces or frames walked at most
};

sub u8  { my ($b, $o) = @_; return $o + 1 <= length $b ? unpack('C', substr($b, $o, 1)) : undef }
sub u16 { my ($b, $o) = @_; return $o + 2 <= length $b ? unpack('n', substr($b, $o, 2)) : undef }
sub u32 { my ($b, $o) = @_; return $o + 4 <= length $b ? unpack('N', substr($b, $o, 4)) : undef }
sub u64 { my ($b, $o) = @_; return $o + 8 <= length $b ? unpack('Q>', substr($b, $o, 8)) : undef }

sub kind_of {
    my ($b) = @_;
    return 'sealed' if substr($b, 0, 3) eq 'IDE';
    return 'live' if substr($b, 0, 3) eq 'IDL';
    if (substr($b, 0, 3) eq 'IDM' && length $b >= 5) {
        my ($v, $k) = (u8($b, 3), u8($b, 4));
        return 'piece' if $v == 4 && $k == 4;
        return "record-v$v-k$k";
    }
    return 'foreign';
}

# ------------------------------------------------------------ field maps

# The fields of a response's entries from $o: status, [flags], header
# count, each header's lengths, body length, [trailer count and lengths].
sub response_fields {
    my ($b, $o, $extras, $prefix) = @_;
    my @f;
    push @f, [$o, 2, "${prefix}status"];
    $o += 2;
    if ($extras) { push @f, [$o, 1, "${prefix}flags"]; $o += 1 }
    my $n = u16($b, $o) // return @f;
    push @f, [$o, 2, "${prefix}header_count"];
    $o += 2;
    for my $i (0 .. ($n < MAX_WALK ? $n : MAX_WALK) - 1) {
        my $nl = u16($b, $o) // return @f;
        push @f, [$o, 2, "${prefix}header${i}_name_len"];
        $o += 2 + $nl;
        my $vl = u32($b, $o) // return @f;
        push @f, [$o, 4, "${prefix}header${i}_value_len"];
        $o += 4 + $vl;
    }
    my $bl = u32($b, $o) // return @f;
    push @f, [$o, 4, "${prefix}body_len"];
    $o += 4 + $bl;
    return @f unless $extras;
    my $tn = u16($b, $o) // return @f;
    push @f, [$o, 2, "${prefix}trailer_count"];
    $o += 2;
    for my $i (0 .. ($tn < MAX_WALK ? $tn : MAX_WALK) - 1) {
        my $nl = u16($b, $o) // return @f;
        push @f, [$o, 2, "${prefix}trailer${i}_name_len"];
        $o += 2 + $nl;
        my $vl = u32($b, $o) // return @f;
        push @f, [$o, 4, "${prefix}trailer${i}_value_len"];
        $o += 4 + $vl;
    }
    return @f;
}

# The integer fields of a record (from $o: a live log's head frame holds
# one), each within the bytes.
sub record_fields {
    my ($b) = @_;
    return grep { $_->[0] + $_->[1] <= length $b } all_record_fields(@_);
}

sub all_record_fields {
    my ($b, $o, $prefix) = @_;
    $o //= 0;
    $prefix //= '';
    return () unless substr($b, $o, 3) eq 'IDM';
    my @f = ([$o + 3, 1, "${prefix}version"], [$o + 4, 1, "${prefix}kind"]);
    my ($v, $k) = (u8($b, $o + 3) // 0, u8($b, $o + 4) // 0);
    my $p = $o + PREFIX;
    if ($k == 1) {
        push @f, [$p, 1, "${prefix}token_len"];
    } elsif ($k == 3) {
        push @f, [$p, 2, "${prefix}status"];
        push @f, [$p + 2, 1, "${prefix}marker_why"] if $v == 5;    # a marker that says why
    } elsif ($k == 4 && $v == 4) {
        push @f, [$o + 21, 4, "${prefix}piece_index"], [$o + 25, 1, "${prefix}piece_form"];
    } elsif ($k == 2 && ($v == 1 || $v == 2)) {
        push @f, response_fields($b, $p, $v == 2, $prefix);
    } elsif ($k == 2 && $v == 3) {
        push @f, [$p, 2, "${prefix}status"], [$p + 2, 1, "${prefix}form"], [$p + 3, 1, "${prefix}plain_version"],
                 [$p + 4, 4, "${prefix}plain_size"];
        # the zstd frame's header: magic, descriptor, window, dictionary id, content size
        push @f, [$p + 8, 4, "${prefix}zstd_magic"], [$p + 12, 1, "${prefix}zstd_descriptor"],
                 [$p + 13, 4, "${prefix}zstd_header_word"], [$p + 17, 4, "${prefix}zstd_header_word2"];
    } elsif ($k == 2 && $v == 4) {
        push @f, [$p + 16, 4, "${prefix}piece_count"], [$p + 20, 4, "${prefix}piece_size"],
                 [$p + 24, 8, "${prefix}body_size"];
        my $n = u32($b, $p + 16) // return @f;
        my $q = $p + 32;
        for my $i (0 .. ($n < MAX_WALK ? $n : MAX_WALK) - 1) {
            last if $q + 4 > length $b;
            push @f, [$q, 4, "${prefix}stored_size$i"];
            $q += 4;
        }
        $q = $p + 32 + 4 * $n;
        my $iv = u8($b, $q) // return @f;
        push @f, [$q, 1, "${prefix}inner_version"];
        push @f, response_fields($b, $q + 1, $iv == 2, $prefix);
    }
    return @f;
}

sub live_fields {
    my ($b) = @_;
    my @f = ([3, 1, 'live_version']);
    my $o = 4;
    for my $i (0 .. MAX_WALK - 1) {
        last if $o + 5 > length $b;
        my ($t, $len) = (substr($b, $o, 1), u32($b, $o + 1));
        push @f, [$o, 1, "frame${i}_type"], [$o + 1, 4, "frame${i}_len"];
        if ($t eq 'H') {
            push @f, record_fields($b, $o + 5, "frame${i}_head_");
        } elsif ($t eq 'E') {
            push @f, [$o + 5, 1, "frame${i}_end"] if $o + 6 <= length $b;
        }
        $o += 5 + $len;
    }
    return grep { $_->[0] + $_->[1] <= length $b } @f;
}

sub sealed_fields {
    my ($b) = @_;
    my @f = ([3, 1, 'seal_version'], [4, 4, 'seal_key_id'], [8, 4, 'seal_nonce']);
    push @f, [length($b) - 16, 4, 'seal_tag'] if length $b >= 36;
    return grep { $_->[0] + $_->[1] <= length $b } @f;
}

sub fields {
    my ($b) = @_;
    my $kind = kind_of($b);
    return sealed_fields($b) if $kind eq 'sealed';
    return live_fields($b) if $kind eq 'live';
    return record_fields($b, 0) if $kind ne 'foreign';
    return ();
}

# Where the head of a record ends (its body or frame begins): a cut there
# or before is a cut-short head.
sub head_end {
    my ($b) = @_;
    my @f = fields($b);
    my $end = 5;
    for my $f (@f) { $end = $f->[0] + $f->[1] if $f->[0] + $f->[1] > $end && $f->[2] !~ /^frame\d+_(?!head)/ }
    return $end < length $b ? $end : length $b;
}

# ------------------------------------------------------------ decoding

sub token_char { return $_[0] =~ /\A[!#\$%&'*+\-.^_`|~0-9A-Za-z]+\z/ }

# The entries of a plain response record from $o, checked as a gateway
# would check them before replaying; undef when anything is off.
sub decode_entries {
    my ($b, $o, $extras) = @_;
    my %r;
    $r{status} = u16($b, $o) // return undef;
    return undef if $r{status} < 100 || $r{status} > 599;
    $o += 2;
    if ($extras) {
        $r{flags} = u8($b, $o) // return undef;
        return undef if $r{flags} & ~7;
        $o += 1;
    }
    my $n = u16($b, $o) // return undef;
    $o += 2;
    my @h;
    for (1 .. $n) {
        my $nl = u16($b, $o) // return undef;
        return undef if $o + 2 + $nl > length $b;
        my $name = substr($b, $o + 2, $nl);
        $o += 2 + $nl;
        my $vl = u32($b, $o) // return undef;
        return undef if $o + 4 + $vl > length $b;
        my $value = substr($b, $o + 4, $vl);
        $o += 4 + $vl;
        return undef unless token_char($name) && $value !~ /[\r\n\0]/;
        push @h, [$name, $value];
    }
    $r{headers} = \@h;
    my $bl = u32($b, $o) // return undef;
    return undef if $o + 4 + $bl > length $b;
    $r{body} = substr($b, $o + 4, $bl);
    $o += 4 + $bl;
    if ($extras && $o < length $b) {
        my $tn = u16($b, $o) // return undef;
        $o += 2;
        for (1 .. $tn) {
            my $nl = u16($b, $o) // return undef;
            return undef if $o + 2 + $nl > length $b;
            my $name = substr($b, $o + 2, $nl);
            $o += 2 + $nl;
            my $vl = u32($b, $o) // return undef;
            return undef if $o + 4 + $vl > length $b;
            my $value = substr($b, $o + 4, $vl);
            $o += 4 + $vl;
            return undef unless token_char($name) && $value !~ /[\r\n\0]/;
        }
    }
    return undef if $o != length $b;
    return \%r;
}

# A plain response record (version 1 or 2): { status, flags, headers, body };
# undef for anything else.
sub decode_response {
    my ($b) = @_;
    return undef unless length $b >= PREFIX && substr($b, 0, 3) eq 'IDM';
    my ($v, $k) = (u8($b, 3), u8($b, 4));
    return undef unless $k == 2 && ($v == 1 || $v == 2);
    return decode_entries($b, PREFIX, $v == 2);
}

# A record of version 4: { id, count, size, body_size, stored => [...] }; undef otherwise.
sub decode_piece_list {
    my ($b) = @_;
    return undef unless length $b >= PREFIX + 32 && substr($b, 0, 3) eq 'IDM' && u8($b, 3) == 4 && u8($b, 4) == 2;
    my $n = u32($b, PREFIX + 16);
    return undef if $n > 4096 || PREFIX + 32 + 4 * $n > length $b;
    return { id => substr($b, PREFIX, 16), count => $n, size => u32($b, PREFIX + 20),
             body_size => u64($b, PREFIX + 24),
             stored => [ map { u32($b, PREFIX + 32 + 4 * $_) } 0 .. $n - 1 ] };
}

# A piece's value: { id, index, form, payload }; undef when not a piece.
sub decode_piece {
    my ($b) = @_;
    return undef unless length $b >= 26 && substr($b, 0, 5) eq "IDM\x04\x04";
    return { id => substr($b, 5, 16), index => u32($b, 21), form => u8($b, 25), payload => substr($b, 26) };
}

# The token of a claim record; undef when not one.
sub claim_token {
    my ($b) = @_;
    return undef unless length $b >= PREFIX + 1 && substr($b, 0, 3) eq 'IDM' && u8($b, 4) == 1;
    my $n = u8($b, PREFIX);
    return undef if PREFIX + 1 + $n > length $b;
    return substr($b, PREFIX + 1, $n);
}

# The frames of a live log: [type, payload], ...; stops at what does not parse.
sub live_frames {
    my ($b) = @_;
    my @f;
    my $o = 4;
    while ($o + 5 <= length $b && @f < MAX_WALK) {
        my ($t, $len) = (substr($b, $o, 1), u32($b, $o + 1));
        last if $o + 5 + $len > length $b;
        push @f, [$t, substr($b, $o + 5, $len)];
        $o += 5 + $len;
    }
    return @f;
}

sub live_log { my (@frames) = @_; return join '', "IDL\x01", map { $_->[0] . pack('N', length $_->[1]) . $_->[1] } @frames }

sub set_fingerprint {
    my ($b, $fp) = @_;
    return $b unless length $b >= PREFIX && substr($b, 0, 3) eq 'IDM';
    substr($b, 5, 32) = $fp;
    return $b;
}

# ------------------------------------------------------------ mutations

my @interesting8  = (0, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xfe, 0xff);
my @interesting16 = (0, 1, 99, 100, 101, 103, 199, 200, 204, 206, 304, 599, 600, 0x7fff, 0x8000, 0xfffe, 0xffff);
my @interesting32 = (0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0x10000, 0xff80, 0x100000, 0x3fffffff, 0x40000000,
                     0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 64 * 1024 * 1024, 64 * 1024 * 1024 + 1, 4096, 4097);
my @interesting64 = (0, 1, 4294967295, 4294967296, 9223372036854775807, 9223372036854775808, 18446744073709551615);

sub pick { my ($rng, @list) = @_; return $list[ $rng->(scalar @list) ] }

# A new value for an integer field of $size bytes holding $old; $room is
# what follows it in the bytes (a length that points just past the end, or
# just inside it, is worth trying).
sub interesting {
    my ($rng, $size, $old, $room) = @_;
    my $r = $rng->(10);
    my $max = $size == 8 ? ~0 : (1 << (8 * $size)) - 1;
    if ($r < 3) {    # near the old value
        my $d = pick($rng, -2, -1, 1, 2, 16, -16);
        my $v = $old + $d;
        return $v < 0 ? 0 : $v > $max ? $max : $v;
    }
    if ($r < 4 && defined $room) {
        my $v = $room + pick($rng, -1, 0, 1, 2);
        return $v < 0 ? 0 : $v > $max ? $max : $v;
    }
    if ($r < 5) { my $v = $old * 2; return $v > $max ? $max : $v }
    return pick($rng, $size == 1 ? @interesting8 : $size == 2 ? @interesting16 : $size == 4 ? @interesting32 : @interesting64);
}

sub put_int {
    my ($b, $o, $size, $v) = @_;
    my $p = $size == 1 ? pack('C', $v & 0xff) : $size == 2 ? pack('n', $v & 0xffff)
          : $size == 4 ? pack('N', $v & 0xffffffff) : pack('Q>', $v);
    substr($b, $o, $size) = $p;
    return $b;
}

# One structure-aware mutation: an integer field set to a value worth
# trying, the version or kind changed, the head cut short.
sub mutate_field {
    my ($b, $rng) = @_;
    my @f = fields($b);
    my $r = $rng->(10);
    if ($r == 0 && length $b > 0) {   # a cut-short head
        my $end = head_end($b);
        my $at = $rng->($end + 1);
        return (substr($b, 0, $at), "cut at $at of the head's $end bytes");
    }
    if ($r == 1 && length $b >= 5) {  # a version above this release's, or another odd one
        my $v = pick($rng, 0, 5, 6, 7, 0x7f, 0x80, 0xff, 1, 2, 3, 4);
        substr($b, 3, 1) = chr $v;
        return ($b, "version byte $v");
    }
    if ($r == 2 && length $b >= 5 && substr($b, 0, 3) eq 'IDM') {
        my $k = pick($rng, 0, 1, 2, 3, 4, 5, 0xff);
        substr($b, 4, 1) = chr $k;
        return ($b, "kind byte $k");
    }
    return mutate_bytes($b, $rng) unless @f;
    my $f = $f[ $rng->(scalar @f) ];
    my ($o, $size, $name) = @$f;
    my $old = $size == 1 ? u8($b, $o) : $size == 2 ? u16($b, $o) : $size == 4 ? u32($b, $o) : u64($b, $o);
    my $v = interesting($rng, $size, $old, length($b) - $o - $size);
    return (put_int($b, $o, $size, $v), "$name $old -> $v");
}

# One byte-level mutation, or a splice with one of @$others.
sub mutate_bytes {
    my ($b, $rng, $others) = @_;
    my $len = length $b;
    my $r = $rng->(12);
    if ($len == 0 || $r == 0) {
        my $n = 1 + $rng->(64);
        my $junk = join '', map { chr $rng->(256) } 1 .. $n;
        return ($b . $junk, "extended by $n random bytes");
    }
    if ($r <= 3) {
        my $n = 1 + $rng->(8);
        my @at;
        for (1 .. $n) {
            my $at = $rng->($len);
            substr($b, $at, 1) = chr(ord(substr($b, $at, 1)) ^ (1 << $rng->(8)));
            push @at, $at;
        }
        return ($b, "bit flips at @at");
    }
    if ($r == 4) {
        my $at = $rng->($len);
        my $v = pick($rng, @interesting8);
        substr($b, $at, 1) = chr $v;
        return ($b, "byte $at = $v");
    }
    if ($r == 5) {
        my $at = $rng->($len);
        return (substr($b, 0, $at), "truncated to $at of $len");
    }
    if ($r == 6) {
        my $at = $rng->($len + 1);
        my $n = 1 + $rng->(16);
        substr($b, $at, 0) = join '', map { chr $rng->(256) } 1 .. $n;
        return ($b, "$n bytes inserted at $at");
    }
    if ($r == 7) {
        my $at = $rng->($len);
        my $n = 1 + $rng->($len - $at < 64 ? $len - $at : 64);
        substr($b, $at, $n) = '';
        return ($b, "$n bytes removed at $at");
    }
    if ($r == 8) {
        my $at = $rng->($len);
        my $n = 1 + $rng->($len - $at < 4096 ? $len - $at : 4096);
        my $times = 1 + $rng->(4);
        substr($b, $at + $n, 0) = substr($b, $at, $n) x $times;
        return ($b, "$n bytes at $at repeated $times times");
    }
    if ($r == 9 && $len >= 4) {
        my $at = $rng->($len - 3);
        my $v = pick($rng, @interesting32);
        return (put_int($b, $at, 4, $v), "32 bits at $at = $v");
    }
    if ($r >= 10 && $others && @$others) {
        my $o = $others->[ $rng->(scalar @$others) ];
        my $cut = $rng->($len + 1);
        my $from = $rng->(length($o) + 1);
        return (substr($b, 0, $cut) . substr($o, $from), "spliced: $cut bytes, then another seed from $from");
    }
    my $at = $rng->($len);
    return (substr($b, 0, $at) . substr($b, $at) x 2, "tail from $at doubled");
}

1;
