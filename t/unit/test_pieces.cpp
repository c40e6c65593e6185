// test_pieces.cpp — responses kept in pieces: the record of version 4
// that lists them (round trip, strict refusal), the pieces' values and
// keys (each on its store key's Cluster slot), and the look that tells a
// piece missing, stale or altered before a replay begins.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "big_endian.hpp"
#include "decide.hpp"
#include "inspect.hpp"
#include "pieces.hpp"
#include "record.hpp"
#include "redis/cluster.hpp"

namespace {

using idem::Digest;
using idem::Header;
using idem::PieceList;

Digest digest_of(std::uint8_t first)
{
    Digest digest;
    for (std::size_t i = 0; i < digest.size(); ++i) {
        digest[i] = static_cast<std::uint8_t>(first + i);
    }
    return digest;
}

const std::string id(idem::pieces_id_size, 'i');

// A list of `count` pieces of `size` bytes over `body` bytes, each stored
// in `stored` bytes.
struct List {
    std::string sizes;
    PieceList list;

    List(std::uint32_t count, std::uint32_t size, std::uint64_t body, std::uint32_t stored = 1000)
    {
        sizes.resize(4 * count);
        for (std::uint32_t i = 0; i < count; i++) {
            idem::put_be<std::uint32_t>(sizes.data() + 4 * i, stored + i);
        }
        list.id = id;
        list.count = count;
        list.size = size;
        list.body_size = body;
        list.stored_sizes = sizes;
    }
};

std::string encode(const List& l, const std::vector<Header>& headers, const idem::ResponseExtras& extras = {})
{
    std::string out(idem::pieces_record_size(headers.data(), headers.size(), extras, l.list.count), '\0');
    EXPECT_EQ(idem::encode_pieces_record(out.data(), digest_of(7), 201, headers.data(), headers.size(), extras, l.list),
              out.size());
    return out;
}

TEST(PiecesRecord, RoundTrip)
{
    List l(3, 1024, 2500);
    std::vector<Header> headers{{"Content-Type", "application/json"}, {"Set-Cookie", "a=1"}};
    std::string bytes = encode(l, headers);
    EXPECT_EQ(bytes.substr(0, 5), std::string("IDM\x04\x02", 5));
    auto record = idem::decode_record(bytes);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->kind, idem::RecordKind::response);
    EXPECT_EQ(record->fingerprint, digest_of(7));
    EXPECT_EQ(record->status, 201);
    EXPECT_EQ(record->header_count, 2);
    EXPECT_TRUE(record->body.empty());
    EXPECT_EQ(record->pieces.id, id);
    EXPECT_EQ(record->pieces.count, 3u);
    EXPECT_EQ(record->pieces.size, 1024u);
    EXPECT_EQ(record->pieces.body_size, 2500u);
    EXPECT_EQ(record->pieces.stored_size(0), 1000u);
    EXPECT_EQ(record->pieces.stored_size(2), 1002u);
    EXPECT_EQ(record->pieces.plain_size(0), 1024u);
    EXPECT_EQ(record->pieces.plain_size(2), 452u);
    EXPECT_EQ(record->pieces.plain_size(3), 0u);
    idem::HeaderReader reader(*record);
    Header h;
    ASSERT_TRUE(reader.next(h));
    EXPECT_EQ(h.name, "Content-Type");
    // decided as any response: a replay of it
    idem::Record decided;
    idem::Unusable why;
    EXPECT_EQ(idem::decide_stored(bytes, digest_of(7), decided, why), idem::Outcome::replayed);
    EXPECT_EQ(idem::decide_stored(bytes, digest_of(8), decided, why), idem::Outcome::mismatch);
}

TEST(PiecesRecord, InspectedWithItsBodySizeAndPieces)
{
    std::string bytes = encode(List(3, 1024, 2500), {{"Content-Type", "application/json"}});
    idem::InspectFacts facts;
    facts.key_hash = "00";
    facts.store = "redis";
    std::string out(idem::inspection_room(5), '\0');
    out.resize(idem::inspection_json(std::string_view(bytes), facts, out.data(), out.size()));
    EXPECT_NE(out.find("\"state\":\"stored\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"body_bytes\":2500,\"trailers\":0,\"pieces\":3,\"piece_size\":1024"), std::string::npos)
        << out;
}

TEST(PiecesRecord, TrailersAndFlagsKept)
{
    List l(2, 4096, 5000);
    std::vector<Header> trailers{{"grpc-status", "0"}};
    idem::ResponseExtras extras{idem::expect_trailers, trailers.data(), trailers.size()};
    std::string bytes = encode(l, {{"Content-Type", "application/grpc"}}, extras);
    auto record = idem::decode_record(bytes);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->flags, idem::expect_trailers);
    EXPECT_EQ(record->trailer_count, 1);
    idem::Record copy = idem::rebased(*record, bytes, bytes.data());
    EXPECT_EQ(copy.pieces.id, id);
}

TEST(PiecesRecord, RefusedWhenItDoesNotAddUp)
{
    std::string good = encode(List(3, 1024, 2500), {});
    for (std::size_t cut = 0; cut < good.size(); ++cut) {
        EXPECT_FALSE(idem::decode_record(good.substr(0, cut))) << cut;
    }
    EXPECT_FALSE(idem::decode_record(good + "x"));
    // a body size the pieces do not hold: too large, or leaving the last empty
    EXPECT_FALSE(idem::decode_record(encode(List(3, 1024, 3073), {})));
    EXPECT_FALSE(idem::decode_record(encode(List(3, 1024, 2048), {})));
    EXPECT_TRUE(idem::decode_record(encode(List(3, 1024, 3072), {})));
    // a piece larger than any piece size: never a replay's room
    EXPECT_FALSE(idem::decode_record(encode(List(1, idem::max_piece_bytes + 1, 10), {})));
    EXPECT_TRUE(idem::decode_record(encode(List(1, idem::max_piece_bytes, 10), {})));
    // no pieces, or more than the most
    EXPECT_EQ(idem::pieces_record_size(nullptr, 0, {}, 0), 0u);
    EXPECT_EQ(idem::pieces_record_size(nullptr, 0, {}, idem::max_piece_count + 1), 0u);
    // a body in the record itself
    std::string with_body = good;
    with_body[with_body.size() - 1] = '\x01';
    EXPECT_FALSE(idem::decode_record(with_body));
    // the kind must be a response
    std::string claim = good;
    claim[4] = '\x01';
    EXPECT_FALSE(idem::decode_record(claim));
}

TEST(PiecesRecord, VersionSixIsALaterRelease)
{
    std::string later = encode(List(1, 1024, 10), {});
    later[3] = '\x06';
    idem::RecordFlaw flaw;
    EXPECT_FALSE(idem::decode_record(later, &flaw));
    EXPECT_EQ(flaw, idem::RecordFlaw::newer_version);
    // version 5 is a marker that says why, which a response is not
    later[3] = '\x05';
    EXPECT_FALSE(idem::decode_record(later, &flaw));
    EXPECT_EQ(flaw, idem::RecordFlaw::damaged);
}

TEST(Piece, CaptureLimit)
{
    // at the defaults (1m and 1m) nothing is kept in pieces: the whole body
    EXPECT_EQ(idem::capture_limit(1024 * 1024, 1024 * 1024), 1024u * 1024);
    EXPECT_EQ(idem::capture_limit(4096, 1024 * 1024), 4096u);
    // a larger limit: one piece's body at a time
    EXPECT_EQ(idem::capture_limit(64 * 1024 * 1024, 1024 * 1024), 1024u * 1024 - idem::piece_room);
}

TEST(Piece, RoundTrip)
{
    std::string value(idem::piece_head_size, '\0');
    idem::encode_piece_head(value.data(), id, 7, idem::piece_form_zstd);
    value += "payload";
    auto piece = idem::decode_piece(value);
    ASSERT_TRUE(piece);
    EXPECT_EQ(piece->id, id);
    EXPECT_EQ(piece->index, 7u);
    EXPECT_EQ(piece->form, idem::piece_form_zstd);
    EXPECT_EQ(piece->payload, "payload");
    // not a record: a piece under a store key is never replayed
    EXPECT_FALSE(idem::decode_record(value));
    value[idem::piece_name_size] = '\x02';  // a form this release does not know
    EXPECT_FALSE(idem::decode_piece(value));
    EXPECT_FALSE(idem::decode_piece(value.substr(0, idem::piece_head_size - 1)));
}

TEST(PieceKey, SharesTheStoreKeysSlot)
{
    for (std::string key : {std::string("idem:") + std::string(64, 'a'), std::string("{idem}:") + std::string(64, 'b'),
                            std::string("x{y") + std::string(64, 'c')}) {
        std::string base(idem::piece_base_size(key), '\0');
        ASSERT_EQ(idem::write_piece_base(key, id, base.data()), base.size());
        std::string piece(base.size() + idem::piece_index_digits, '\0');
        idem::write_piece_key(base, 0x1a2b, piece.data());
        EXPECT_EQ(piece.substr(piece.size() - 8), "00001a2b");
        EXPECT_EQ(idem::redis::key_slot(piece), idem::redis::key_slot(key)) << key;
        EXPECT_NE(piece, key);
    }
    EXPECT_TRUE(idem::pieces_keyable("idem:"));
    EXPECT_TRUE(idem::pieces_keyable("{tenant}:idem:"));
    EXPECT_FALSE(idem::pieces_keyable("a}b:"));
    EXPECT_FALSE(idem::pieces_keyable("{}:"));
}

// The look's entries for `list` as the store would give them.
std::string look_of(const PieceList& list)
{
    std::string look;
    for (std::uint32_t i = 0; i < list.count; i++) {
        std::string value(idem::piece_head_size, '\0');
        idem::encode_piece_head(value.data(), list.id, i, idem::piece_form_plain);
        std::string entry(idem::piece_look_entry_size, '\0');
        idem::encode_piece_look(entry.data(), list.stored_size(i), value);
        look += entry;
    }
    return look;
}

TEST(PieceLook, TellsTheFirstPieceMissingStaleOrAltered)
{
    List l(4, 1024, 4000);
    std::string look = look_of(l.list);
    EXPECT_EQ(idem::first_bad_piece(l.list, look, false), 4u);
    // missing
    std::string missing = look;
    idem::encode_piece_look(missing.data() + 2 * idem::piece_look_entry_size, idem::absent_piece, {});
    EXPECT_EQ(idem::first_bad_piece(l.list, missing, false), 2u);
    // of another response: another id
    std::string stale = look;
    stale[idem::piece_look_entry_size + 4 + 5] ^= 1;
    EXPECT_EQ(idem::first_bad_piece(l.list, stale, false), 1u);
    EXPECT_EQ(idem::first_bad_piece(l.list, stale, true), 4u);  // sealed: told when it is opened
    // another size
    std::string resized = look;
    idem::put_be<std::uint32_t>(resized.data() + 3 * idem::piece_look_entry_size, 999);
    EXPECT_EQ(idem::first_bad_piece(l.list, resized, true), 3u);
    // cut short
    EXPECT_EQ(idem::first_bad_piece(l.list, look.substr(0, look.size() - 1), false), 3u);
}

}  // namespace

// A record lists at most max_piece_count pieces: one more is refused by
// decode_record itself, as a damaged record of ours (410).
TEST(PiecesRecord, OneMorePieceThanTheMostIsRefused)
{
    const std::uint32_t most = idem::max_piece_count;
    std::string bytes = encode(List(most, 1024, std::uint64_t{1024} * most), {});
    ASSERT_TRUE(idem::decode_record(bytes));
    // count + 1, a body that needs it, one more stored size
    constexpr std::size_t count_at = idem::record_prefix_size + idem::pieces_id_size;
    idem::put_be<std::uint32_t>(bytes.data() + count_at, most + 1);
    idem::put_be<std::uint64_t>(bytes.data() + count_at + 8, std::uint64_t{1024} * most + 1);
    bytes.insert(count_at + 16 + 4 * std::size_t{most}, std::string("\0\0\x03\xe8", 4));
    idem::RecordFlaw flaw = idem::RecordFlaw::none;
    EXPECT_FALSE(idem::decode_record(bytes, &flaw));
    EXPECT_EQ(flaw, idem::RecordFlaw::damaged);
}

// The room a replay takes is the location's: a record of any kind whose
// body is over its idempotency_max_response_size, or kept in pieces larger
// than its idempotency_piece_size holds, is 410 there.
TEST(PiecesRecord, HeldToTheLocationsLimits)
{
    std::string bytes = encode(List(3, 1024, 2500), {});
    idem::Record record;
    idem::Unusable why = idem::Unusable::no;
    ASSERT_EQ(idem::decide_stored(bytes, digest_of(7), record, why), idem::Outcome::replayed);
    EXPECT_EQ(idem::decide_limits(idem::Outcome::replayed, record, {2500, 1024}, why), idem::Outcome::replayed);
    EXPECT_EQ(why, idem::Unusable::no);
    EXPECT_EQ(idem::decide_limits(idem::Outcome::replayed, record, {2499, 1024}, why), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::too_large);
    why = idem::Unusable::no;
    EXPECT_EQ(idem::decide_limits(idem::Outcome::replayed, record, {2500, 1023}, why), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::pieces_too_large);
    // what is not a replay is left as it was
    why = idem::Unusable::no;
    EXPECT_EQ(idem::decide_limits(idem::Outcome::mismatch, record, {0, 0}, why), idem::Outcome::mismatch);
    EXPECT_EQ(why, idem::Unusable::no);

    // eight pieces of 64 MB at the defaults (1m, pieces of 1m): 410
    const std::uint32_t big = idem::max_piece_bytes;
    std::string huge = encode(List(8, big, std::uint64_t{big} * 8), {});
    ASSERT_EQ(idem::decide_stored(huge, digest_of(7), record, why), idem::Outcome::replayed);
    const idem::ReplayLimits defaults{1024 * 1024, idem::piece_body_size(1024 * 1024)};
    EXPECT_EQ(idem::decide_limits(idem::Outcome::replayed, record, defaults, why), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::too_large);
    // pieces of 64 MB over a body the limit allows: still 410
    std::string wide = encode(List(1, big, 1000), {});
    ASSERT_EQ(idem::decide_stored(wide, digest_of(7), record, why), idem::Outcome::replayed);
    EXPECT_EQ(idem::decide_limits(idem::Outcome::replayed, record, defaults, why), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::pieces_too_large);
}
