# Bodies.pm — response bodies that compress as real API responses do, for
# the test upstream (scripts/upstream.pl ?kind=...) and the sizing and
# benchmark scripts. Core Perl only; deterministic: the same kind and size
# give the same bytes on every machine.
#
#   use Bodies;
#   my ($body, $content_type) = Bodies::body($kind, $size, [$seed]);
#   (another seed: another body of the same kind and size)
#
# Kinds (size: the exact length in bytes, or the kind's own when undef; a
# JSON kind is filled out to it by a last field of random characters):
#   ack         a JSON acknowledgement (a refund), about 330 B
#   payment     a JSON payment object (ids, amounts, timestamps, a card,
#               metadata, shipping, risk, customer), about 2 KB
#   list        a JSON list of such objects, 20 KB by default
#   document    prose-like text (a vocabulary of a few thousand words,
#               Zipf-like), 256 KB by default
#   transcript  an event-stream transcript of a streamed answer (an event
#               per token, with ids), 50 KB by default
#   noise       bytes that do not compress, 4 KB by default
package Bodies;

use strict;
use warnings;

use Digest::SHA ();

my %default_size = (list => 20 * 1024, document => 256 * 1024, transcript => 50 * 1024, noise => 4096);
my %type = (ack => 'application/json', payment => 'application/json', list => 'application/json',
            document => 'text/plain; charset=utf-8', transcript => 'text/event-stream',
            noise => 'application/octet-stream');

sub kinds { return sort keys %type }

# A small linear congruential generator: deterministic, seeded per body.
sub rng {
    my ($seed) = @_;
    my $x = $seed & 0x7fffffff;
    return sub {
        my ($n) = @_;
        $x = ($x * 1103515245 + 12345) & 0x7fffffff;
        return int($x / 0x80000000 * $n);
    };
}

my @b62 = ('0' .. '9', 'a' .. 'z', 'A' .. 'Z');

sub id {
    my ($r, $prefix, $len) = @_;
    return $prefix . join '', map { $b62[$r->(62)] } 1 .. $len;
}

sub payment {
    my ($r, $i) = @_;
    my $amount = 100 + $r->(99_900);
    my $created = 1_730_000_000 + $r->(20_000_000);
    my @status = qw(succeeded succeeded succeeded requires_action processing canceled);
    my @brand = qw(visa mastercard amex);
    my @cur = qw(eur usd gbp);
    my $pi = id($r, 'pi_', 24);
    return sprintf '{"id":"%s","object":"payment_intent","amount":%d,"amount_capturable":0,'
        . '"amount_received":%d,"application_fee_amount":null,"capture_method":"automatic",'
        . '"client_secret":"%s_secret_%s","confirmation_method":"automatic","created":%d,'
        . '"currency":"%s","customer":"%s","description":"Order #%d","last_payment_error":null,'
        . '"latest_charge":"%s","livemode":false,"metadata":{"order_id":"%d","sku":"SKU-%04d",'
        . '"channel":"%s"},"payment_method":"%s","payment_method_types":["card"],'
        . '"payment_method_details":{"card":{"brand":"%s","last4":"%04d","exp_month":%d,"exp_year":%d,'
        . '"fingerprint":"%s","funding":"credit","country":"%s"}},"receipt_email":"customer%d@example.com",'
        . '"shipping":{"name":"Customer %d","address":{"line1":"%d Main Street","city":"Springfield",'
        . '"postal_code":"%05d","country":"%s"},"carrier":null,"phone":null,"tracking_number":null},'
        . '"amount_details":{"tip":{}},"automatic_payment_methods":{"allow_redirects":"always","enabled":true},'
        . '"canceled_at":null,"cancellation_reason":null,"invoice":null,"next_action":null,"on_behalf_of":null,'
        . '"payment_method_configuration_details":{"id":"%s","parent":null},'
        . '"payment_method_options":{"card":{"installments":null,"mandate_options":null,"network":null,'
        . '"request_three_d_secure":"automatic"},"link":{"persistent_token":null}},"processing":null,'
        . '"review":null,"setup_future_usage":null,"source":null,"statement_descriptor":null,'
        . '"statement_descriptor_suffix":null,"transfer_data":null,"transfer_group":null,'
        . '"outcome":{"network_status":"approved_by_network","reason":null,"risk_level":"normal","risk_score":%d,'
        . '"seller_message":"Payment complete.","type":"authorized"},"customer_details":{"email":"customer%d@example.com",'
        . '"phone":"+4930%07d","tax_exempt":"none","tax_ids":[],"preferred_locales":["en","de"]},"status":"%s"}',
        $pi, $amount, $amount, $pi, id($r, '', 24), $created, $cur[$r->(3)], id($r, 'cus_', 14),
        10_000 + $r->(90_000), id($r, 'ch_', 24), $r->(1_000_000), $r->(10_000),
        (qw(web ios android))[$r->(3)], id($r, 'pm_', 24), $brand[$r->(3)], $r->(10_000), 1 + $r->(12),
        2026 + $r->(6), id($r, '', 16), (qw(DE FR US GB NL))[$r->(5)], $r->(100_000), $i, 1 + $r->(999),
        $r->(100_000), (qw(DE FR US GB NL))[$r->(5)], id($r, 'pmc_', 24), $r->(100), $r->(100_000),
        $r->(10_000_000), $status[$r->(6)];
}

# The vocabulary, built once (a reference: copying its 3000 words for
# every word drawn made a 256 KB document take seconds of CPU).
my @words;
sub vocabulary {
    return \@words if @words;
    my $r = rng(7);
    my @syll = qw(ka to ri mon sel ver an de lo tra pen is ur gal ci ne op ar ed th in);
    my %seen;
    while (@words < 3000) {
        my $w = join '', map { $syll[$r->(scalar @syll)] } 1 .. 1 + $r->(3);
        push @words, $w unless $seen{$w}++;
    }
    return \@words;
}

# A word with a Zipf-like choice: low ranks far more often.
sub word {
    my ($r) = @_;
    my $v = vocabulary();
    my $rank = int(scalar(@$v) ** ($r->(1_000_000) / 1_000_000)) - 1;
    return $v->[$rank];
}

sub fit {
    my ($text, $size, $pad) = @_;
    $text = substr($text, 0, $size) if length $text > $size;
    return $text . ($pad x ($size - length $text));
}

# A JSON object of exactly $size bytes: $json (an object) with a last
# field of random base62 characters filling it out (the way a cursor or a
# token would), or cut when it is longer.
sub fit_json {
    my ($r, $json, $size) = @_;
    my $room = $size - length($json) - length(',"next_page":""');
    return fit($json, $size, ' ') if $room < 0;
    my $cursor = join '', map { $b62[$r->(62)] } 1 .. $room;
    return substr($json, 0, -1) . ',"next_page":"' . $cursor . '"}';
}

sub body {
    my ($kind, $size, $seed) = @_;
    die "unknown body kind '$kind'\n" unless $type{$kind};
    $size //= $default_size{$kind};
    my $r = rng(length($kind) * 7919 + ($size // 0) + ($seed // 0) * 104729);
    my $text;
    if ($kind eq 'ack') {
        $text = sprintf '{"id":"%s","object":"refund","amount":%d,"balance_transaction":"%s",'
            . '"charge":"%s","created":%d,"currency":"eur","metadata":{},"payment_intent":"%s",'
            . '"reason":"requested_by_customer","receipt_number":null,"status":"pending"}',
            id($r, 're_', 24), 100 + $r->(9900), id($r, 'txn_', 24), id($r, 'ch_', 24),
            1_730_000_000 + $r->(20_000_000), id($r, 'pi_', 24);
        $text = fit_json($r, $text, $size) if defined $size;
    } elsif ($kind eq 'payment') {
        $text = payment($r, 1);
        $text = fit_json($r, $text, $size) if defined $size;
    } elsif ($kind eq 'list') {
        my @items;
        my $len = 40;
        for (my $i = 1; $len < $size; $i++) {
            push @items, payment($r, $i);
            $len += length($items[-1]) + 1;
        }
        pop @items if @items > 1 && $len > $size;
        $text = fit_json($r, '{"object":"list","has_more":true,"data":[' . join(',', @items) . ']}', $size);
    } elsif ($kind eq 'document') {
        my @parts;
        my $len = 0;
        while ($len < $size) {
            my $sentence = ucfirst(join ' ', map { word($r) } 1 .. 6 + $r->(14)) . ($r->(8) ? '. ' : ".\n\n");
            push @parts, $sentence;
            $len += length $sentence;
        }
        $text = fit(join('', @parts), $size, ' ');
    } elsif ($kind eq 'transcript') {
        my @events;
        my $len = 0;
        for (my $i = 1; $len < $size; $i++) {
            my $e = sprintf "id: %d\nevent: token\ndata: {\"index\":%d,\"delta\":\"%s \",\"model\":\"m-%d\"}\n\n",
                $i, $i, word($r), 1;
            push @events, $e;
            $len += length $e;
        }
        $text = fit(join('', @events), $size, "\n");
    } else {    # noise
        # SHA-256 in counter mode: as random as the generator, and fast at
        # the tens of megabytes a response kept in pieces has
        my $seed = $r->(0x7fffffff);
        my @blocks;
        push @blocks, Digest::SHA::sha256("$seed:$_") for 0 .. int(($size + 31) / 32);
        $text = substr(join('', @blocks), 0, $size);
    }
    return ($text, $type{$kind});
}

1;
