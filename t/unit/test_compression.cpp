// test_compression.cpp — compressed response records (record version 3):
// the layout, round trips of both plain versions, when compression is
// skipped, and refusal of anything that does not open into exactly the
// record it stands for; and decide_inflated's answers.
#include <gtest/gtest.h>
#include <zdict.h>

#include <memory>
#include <string>
#include <vector>

#include "compression.hpp"
#include "decide.hpp"
#include "record.hpp"

namespace {

using idem::CompressedHead;
using idem::Digest;
using idem::Header;
using idem::Outcome;
using idem::Record;
using idem::Unusable;

Digest digest_of(std::uint8_t first)
{
    Digest digest;
    for (std::size_t i = 0; i < digest.size(); ++i) {
        digest[i] = static_cast<std::uint8_t>(first + i);
    }
    return digest;
}

// A JSON-ish body that compresses as API responses do.
std::string json_body(std::size_t size)
{
    std::string out = "[";
    for (unsigned i = 0; out.size() < size; ++i) {
        out += "{\"id\":\"pi_" + std::to_string(1000003u * i % 999983u) + "\",\"amount\":" + std::to_string(i * 37 % 5000)
               + ",\"currency\":\"eur\",\"status\":\"succeeded\"},";
    }
    out.resize(size);
    return out;
}

std::string response(std::uint16_t status, std::string_view body, const idem::ResponseExtras& extras = {})
{
    const std::vector<Header> headers = {{"Content-Type", "application/json"}, {"X-Request-Id", "req-1"}};
    std::string out(idem::response_size(headers.data(), headers.size(), body.size(), extras), '?');
    char* at = idem::encode_response_head(out.data(), digest_of(7), status, headers.data(), headers.size(),
                                          body.size(), extras);
    body.copy(at, body.size());
    idem::encode_response_tail(at + body.size(), extras);
    return out;
}

std::string compress(idem::RecordCompressor& c, const std::string& plain)
{
    std::string out(idem::RecordCompressor::bound(plain.size()), '\0');
    out.resize(c.compress(plain, out.data()));
    return out;
}

std::string inflate(const std::string& record)
{
    std::optional<CompressedHead> head = idem::compressed_head(record);
    if (!head) {
        return "<no head>";
    }
    idem::RecordInflater inflater;
    std::string out(head->plain_size, '\0');
    std::optional<std::string_view> plain = inflater.inflate(record, *head, out.data());
    return plain ? std::string(*plain) : "<does not open>";
}

TEST(Compression, RoundTripOfBothPlainVersions)
{
    idem::RecordCompressor c(idem::record_compression_level);
    const Header trailers[] = {{"grpc-status", "0"}};
    for (const std::string& plain :
         {response(201, json_body(2048)), response(200, json_body(20000), {idem::allow_ranges, trailers, 1})}) {
        std::string packed = compress(c, plain);
        ASSERT_FALSE(packed.empty());
        EXPECT_LT(packed.size(), plain.size() / 2);
        EXPECT_EQ(packed.substr(0, 4), std::string("IDM\x03", 4));
        EXPECT_EQ(packed[4], plain[4]);                      // the kind
        EXPECT_EQ(packed.substr(5, 32), plain.substr(5, 32));  // the fingerprint, outside the frame
        EXPECT_EQ(packed.substr(37, 2), plain.substr(37, 2));  // the status, too
        EXPECT_EQ(packed[39], '\x01');                        // zstd
        EXPECT_EQ(packed[40], plain[3]);                      // the plain record's version

        std::optional<CompressedHead> head = idem::compressed_head(packed);
        ASSERT_TRUE(head.has_value());
        EXPECT_EQ(head->plain_size, plain.size());
        EXPECT_EQ(head->fingerprint, digest_of(7));
        EXPECT_EQ(head->status, static_cast<std::uint16_t>(plain[37] << 8 | static_cast<unsigned char>(plain[38])));
        EXPECT_EQ(inflate(packed), plain);
        // as a record, it is read only once opened
        idem::RecordFlaw flaw = idem::RecordFlaw::none;
        EXPECT_FALSE(idem::decode_record(packed, &flaw).has_value());
        EXPECT_EQ(flaw, idem::RecordFlaw::compressed);
    }
}

TEST(Compression, SkippedWhenItDoesNotPay)
{
    idem::RecordCompressor c(idem::record_compression_level);
    // small: under min_compressed_plain
    EXPECT_EQ(compress(c, response(201, "{\"ok\":true}")), "");
    // random bytes do not shrink by a sixteenth
    std::string noise(4096, '\0');
    std::uint32_t x = 12345;
    for (char& ch : noise) {
        x = x * 1103515245u + 12345u;
        ch = static_cast<char>(x >> 24);
    }
    EXPECT_EQ(compress(c, response(200, noise)), "");
    // not a response: a claim, an unreplayable marker, garbage
    std::string claim(idem::claim_size(std::string(200, 't')), '\0');
    idem::encode_claim(digest_of(1), std::string(200, 't'), claim.data());
    EXPECT_EQ(compress(c, claim + std::string(300, 'x')), "");
    EXPECT_EQ(compress(c, std::string(1000, 'a')), "");
}

TEST(Compression, RefusesWhatDoesNotOpenExactly)
{
    idem::RecordCompressor c(idem::record_compression_level);
    const std::string plain = response(201, json_body(4096));
    const std::string packed = compress(c, plain);
    ASSERT_FALSE(packed.empty());

    // a byte of the frame altered: the checksum, or the frame, refuses it
    for (std::size_t at : {packed.size() - 1, packed.size() - 5, packed.size() / 2, idem::compressed_prefix_size + 6}) {
        std::string bad = packed;
        bad[at] ^= 0x20;
        EXPECT_EQ(inflate(bad), "<does not open>") << "altered at " << at;
    }
    // cut short, or with bytes after the frame
    EXPECT_EQ(inflate(packed.substr(0, packed.size() - 1)), "<does not open>");
    EXPECT_EQ(inflate(packed + "x"), "<does not open>");
    // the size the head states is not the frame's
    std::string wrong = packed;
    wrong[44] = static_cast<char>(wrong[44] + 1);
    EXPECT_EQ(inflate(wrong), "<does not open>");
    // the status outside the frame is not the one inside
    std::string status = packed;
    status[38] ^= 0x01;
    EXPECT_EQ(inflate(status), "<does not open>");
    // a plain version other than 1 or 2, a kind other than response: a
    // record of ours, damaged; a plain version above this release's: a
    // later release's record
    idem::RecordFlaw flaw = idem::RecordFlaw::none;
    for (char v : {'\x00', '\x03', '\x04'}) {
        std::string version = packed;
        version[40] = v;
        EXPECT_FALSE(idem::compressed_head(version, &flaw).has_value());
        EXPECT_EQ(flaw, idem::RecordFlaw::damaged) << int(v);
    }
    std::string later = packed;
    later[40] = '\x05';
    EXPECT_FALSE(idem::compressed_head(later, &flaw).has_value());
    EXPECT_EQ(flaw, idem::RecordFlaw::newer_version);
    std::string kind = packed;
    kind[4] = '\x01';
    EXPECT_FALSE(idem::compressed_head(kind, &flaw).has_value());
    EXPECT_EQ(flaw, idem::RecordFlaw::damaged);
    // a form this release does not know: a later release's record
    std::string form = packed;
    form[39] = '\x02';
    EXPECT_FALSE(idem::compressed_head(form, &flaw).has_value());
    EXPECT_EQ(flaw, idem::RecordFlaw::newer_version);
    // too short for a head: damaged; bytes of no compressed record: no flaw
    for (std::size_t n : {std::size_t{5}, idem::record_prefix_size + 2, idem::compressed_prefix_size - 1}) {
        EXPECT_FALSE(idem::compressed_head(packed.substr(0, n), &flaw).has_value());
        EXPECT_EQ(flaw, idem::RecordFlaw::damaged) << n;
    }
    EXPECT_FALSE(idem::compressed_head(plain, &flaw).has_value());
    EXPECT_EQ(flaw, idem::RecordFlaw::none);
}

TEST(Compression, DecideInflated)
{
    idem::RecordCompressor c(idem::record_compression_level);
    const std::string plain = response(201, json_body(3000));
    const std::string packed = compress(c, plain);
    ASSERT_FALSE(packed.empty());
    idem::RecordInflater inflater;
    idem::Record record;
    Unusable why = Unusable::no;

    // first decided as it stands: a mismatch needs no opening
    EXPECT_EQ(idem::decide_stored(packed, digest_of(8), record, why), Outcome::mismatch);
    EXPECT_EQ(idem::decide_stored(packed, digest_of(7), record, why), Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::compressed);

    std::string out(plain.size(), '\0');
    std::string_view value = packed;
    EXPECT_EQ(idem::decide_inflated(value, inflater, {}, plain.size(), out.data(), digest_of(7), record, why),
              Outcome::replayed);
    EXPECT_EQ(why, Unusable::no);
    EXPECT_EQ(value, plain);
    EXPECT_EQ(record.status, 201);
    EXPECT_EQ(record.body, json_body(3000));

    // over what this location keeps: refused, not opened
    value = packed;
    EXPECT_EQ(idem::decide_inflated(value, inflater, {}, plain.size() - 1, nullptr, digest_of(7), record, why),
              Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::too_large);
    // altered: unverifiable, `value` unchanged
    std::string bad = packed;
    bad[bad.size() - 2] ^= 1;
    value = bad;
    EXPECT_EQ(idem::decide_inflated(value, inflater, {}, plain.size(), out.data(), digest_of(7), record, why),
              Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::broken_frame);
    EXPECT_EQ(value.data(), bad.data());
    // a later form, as decide_stored sees it: 410 from a later release
    std::string form = packed;
    form[39] = '\x07';
    EXPECT_EQ(idem::decide_stored(form, digest_of(7), record, why), Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::newer_version);
    // ... and a later plain version inside; a head cut short: 410, not 503
    std::string later = packed;
    later[40] = '\x09';
    EXPECT_EQ(idem::decide_stored(later, digest_of(7), record, why), Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::newer_version);
    EXPECT_EQ(idem::decide_stored(packed.substr(0, 30), digest_of(7), record, why), Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::damaged);
}

// A dictionary trained, as `zstd --train` does, on other records' bodies
// of the same shape (payment objects with random ids).
std::string trained_dictionary()
{
    std::string samples;
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; i < 600; ++i) {
        std::string body = "{\"id\":\"pi_" + std::to_string(i * 2654435761u) + "\",\"object\":\"payment_intent\",\"amount\":"
                           + std::to_string(i * 37 % 90000) + ",\"currency\":\"eur\",\"status\":\"succeeded\","
                           "\"customer\":\"cus_" + std::to_string(i * 40503u) + "\",\"metadata\":{\"order\":\""
                           + std::to_string(i) + "\"}}";
        samples += body;
        sizes.push_back(body.size());
    }
    std::string dict(8192, '\0');
    std::size_t n = ZDICT_trainFromBuffer(dict.data(), dict.size(), samples.data(), sizes.data(),
                                          static_cast<unsigned>(sizes.size()));
    EXPECT_FALSE(ZDICT_isError(n)) << ZDICT_getErrorName(n);
    dict.resize(ZDICT_isError(n) ? 0 : n);
    return dict;
}

TEST(Dictionary, SmallRecordsCompressWithItAndOpenOnlyWithIt)
{
    std::string bytes = trained_dictionary();
    std::unique_ptr<idem::ZstdDictionary> d(idem::ZstdDictionary::create(bytes, idem::record_compression_level));
    ASSERT_TRUE(d);
    EXPECT_NE(d->id(), 0u);
    EXPECT_FALSE(idem::ZstdDictionary::create("raw bytes, no dictionary header", 1));

    const std::string plain =
        response(201, "{\"id\":\"pi_98765432101\",\"object\":\"payment_intent\",\"amount\":4200,\"currency\":\"eur\","
                      "\"status\":\"succeeded\",\"customer\":\"cus_1234567\",\"metadata\":{\"order\":\"9999\"}}");
    idem::RecordCompressor c(idem::record_compression_level);
    std::string without = compress(c, plain);  // under 512 bytes: not tried without one
    EXPECT_TRUE(without.empty());
    std::string with(idem::RecordCompressor::bound(plain.size()), '\0');
    with.resize(c.compress(plain, with.data(), d.get()));
    ASSERT_FALSE(with.empty());
    EXPECT_LT(with.size(), plain.size() * 3 / 4) << plain.size() << " -> " << with.size();
    std::optional<CompressedHead> head = idem::compressed_head(with);
    ASSERT_TRUE(head);
    EXPECT_EQ(idem::frame_dictionary(head->frame), d->id());

    // the compressor forgets it for the next record
    std::string large = response(201, json_body(3000));
    std::string next = compress(c, large);
    ASSERT_TRUE(idem::compressed_head(next));
    EXPECT_EQ(idem::frame_dictionary(idem::compressed_head(next)->frame), 0u);

    idem::ZstdDictionary* list[] = {d.get()};
    const idem::Dictionaries have{list, 1};
    idem::RecordInflater inflater;
    std::string out(head->plain_size, '\0');
    std::optional<std::string_view> opened = inflater.inflate(with, *head, out.data(), have);
    ASSERT_TRUE(opened);
    EXPECT_EQ(*opened, plain);
    // without it: never opened as something else
    EXPECT_FALSE(inflater.inflate(with, *head, out.data()));
    Record record{};
    Unusable why = Unusable::no;
    std::string_view value = with;
    EXPECT_EQ(idem::decide_inflated(value, inflater, {}, plain.size(), out.data(), digest_of(7), record, why),
              Outcome::unverifiable);
    EXPECT_EQ(why, Unusable::unknown_dictionary);
    EXPECT_NE(std::string(idem::unusable_reason(why)).find("dictionary"), std::string::npos);
    value = with;
    EXPECT_EQ(idem::decide_inflated(value, inflater, have, plain.size(), out.data(), digest_of(7), record, why),
              Outcome::replayed);
    EXPECT_EQ(value, plain);
}

}  // namespace
