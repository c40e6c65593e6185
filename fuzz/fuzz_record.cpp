// fuzz_record.cpp — libFuzzer target: idem::decode_record on arbitrary
// bytes (the value under an idempotency key, as Redis hands it back). When
// the bytes decode: every view lies inside them, HeaderReader yields exactly
// header_count headers that tile the header block, and the encoders rebuild
// the very same bytes (the format has one encoding per record). A record is
// never a proper prefix of another, so the bytes less their last one never
// decode. And the other way: records of each kind encoded from fields taken
// from the input decode back to those fields, unless the response is one
// that must not be sent again (a status outside 200-599, a header name that
// is not a token, a value with CR, LF or NUL), which is refused — with the
// flaw the capture's check (replayable.hpp) finds in the same response.
// Unreplayable markers, plain or saying why, rebuild the same bytes too.
// Compressed records (version 3, compression.hpp): bytes whose head reads
// open, if at all, into exactly the size it states, and into a plain
// record of version 1 or 2 that is then checked as above; and a plain
// response that compresses opens back into the very same bytes.
// Records of a response kept in pieces (version 4, pieces.hpp) rebuild
// the same bytes too, and encode from the input's fields and decode back;
// pieces and looks at them are read from arbitrary bytes without a read
// outside them. Whatever the decision replays is within the location's
// limits (body size, piece size), and bytes with the record's magic are
// never answered as someone else's value.
//
//   make fuzz                 (all targets; see the Makefile)
//   build/fuzz/fuzz_record -max_len=4096 build/fuzz/corpus/fuzz_record
#include <algorithm>
#include <cstddef>
#include <string>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "big_endian.hpp"
#include "compression.hpp"
#include "decide.hpp"
#include "pieces.hpp"
#include "record.hpp"
#include "replayable.hpp"

namespace {

using idem::Header;
using idem::Record;
using idem::RecordKind;

bool inside(std::string_view part, std::string_view whole)
{
    if (part.empty()) {
        return true;  // an empty view may point anywhere; it is never read
    }
    return part.data() >= whole.data()
           && part.data() + part.size() <= whole.data() + whole.size();
}

// Which responses may be sent again, said independently of record.cpp: a
// status of 100-599, header names that are RFC 9110 tokens, values without
// CR, LF or NUL.
bool sendable_entry(const Header& h)
{
    if (h.name.empty()) {
        return false;
    }
    static const std::string_view tchar_symbols = "!#$%&'*+-.^_`|~";
    for (char c : h.name) {
        const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alnum && tchar_symbols.find(c) == std::string_view::npos) {
            return false;
        }
    }
    return h.value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool sendable(std::uint16_t status, const std::vector<Header>& headers, const std::vector<Header>& trailers = {})
{
    if (status < 200 || status > 599) {
        return false;
    }
    for (const Header& h : headers) {
        if (!sendable_entry(h)) {
            return false;
        }
    }
    for (const Header& h : trailers) {
        if (!sendable_entry(h)) {
            return false;
        }
    }
    return true;
}

// Touches every byte of a view, so that ASan checks each read.
unsigned sum(std::string_view bytes)
{
    unsigned s = 0;
    for (char c : bytes) {
        s += static_cast<unsigned char>(c);
    }
    return s;
}

void check_round_trip(std::string_view bytes, const Record& record)
{
    std::vector<char> out;
    switch (record.kind) {
    case RecordKind::claim: {
        const std::size_t size = idem::claim_size(record.token);
        FUZZ_CHECK(size == bytes.size());
        out.resize(size);
        FUZZ_CHECK(idem::encode_claim(record.fingerprint, record.token, out.data()) == size);
        break;
    }
    case RecordKind::response: {
        std::vector<Header> headers;
        idem::HeaderReader reader(record);
        Header h;
        while (reader.next(h)) {
            headers.push_back(h);
        }
        std::vector<Header> trailers;
        idem::HeaderReader trailer_reader = idem::HeaderReader::trailers(record);
        while (trailer_reader.next(h)) {
            trailers.push_back(h);
        }
        // decode_record hands out no response that must not be sent again
        FUZZ_CHECK(sendable(record.status, headers, trailers));
        const idem::ResponseExtras extras{record.flags, trailers.data(), trailers.size()};
        if (static_cast<std::uint8_t>(bytes[3]) == idem::record_version_pieces) {
            FUZZ_CHECK(record.body.empty() && record.pieces.count != 0);
            const std::size_t size =
                idem::pieces_record_size(headers.data(), headers.size(), extras, record.pieces.count);
            FUZZ_CHECK(size == bytes.size());
            out.resize(size);
            FUZZ_CHECK(idem::encode_pieces_record(out.data(), record.fingerprint, record.status, headers.data(),
                                                  headers.size(), extras, record.pieces)
                       == size);
            break;
        }
        FUZZ_CHECK(record.pieces.count == 0);
        // a version 2 record always has extras, a version 1 record none
        FUZZ_CHECK(extras.any() == (static_cast<std::uint8_t>(bytes[3]) == idem::record_version_extras));
        const std::size_t size =
            idem::response_size(headers.data(), headers.size(), record.body.size(), extras);
        FUZZ_CHECK(size == bytes.size());
        out.resize(size);
        char* body = idem::encode_response_head(out.data(), record.fingerprint, record.status,
                                                headers.data(), headers.size(),
                                                record.body.size(), extras);
        FUZZ_CHECK(body != nullptr);
        if (!record.body.empty()) {
            std::memcpy(body, record.body.data(), record.body.size());
        }
        FUZZ_CHECK(idem::encode_response_tail(body + record.body.size(), extras) == out.data() + out.size());
        break;
    }
    case RecordKind::unreplayable: {
        // a marker says why in version 5 only, and then never "unsaid"
        const bool says = record.why != idem::MarkerWhy::unsaid;
        FUZZ_CHECK(says == (static_cast<std::uint8_t>(bytes[3]) == idem::record_version_marker_why));
        const std::size_t size = says ? idem::unreplayable_why_size : idem::unreplayable_size;
        FUZZ_CHECK(size == bytes.size());
        out.resize(size);
        FUZZ_CHECK(idem::encode_unreplayable(record.fingerprint, record.status, record.why, out.data()) == size);
        break;
    }
    default:
        FUZZ_CHECK(!"decode_record returned an unknown kind");
    }
    FUZZ_CHECK(out.size() == bytes.size());
    FUZZ_CHECK(std::memcmp(out.data(), bytes.data(), bytes.size()) == 0);
}

void check_record(std::string_view bytes, const Record& record)
{
    FUZZ_CHECK(bytes.size() >= 3 + 1 + 1 + 32);
    FUZZ_CHECK(std::memcmp(bytes.data(), "IDM", 3) == 0);
    FUZZ_CHECK(bytes[3] == idem::record_version || bytes[3] == idem::record_version_extras
               || bytes[3] == idem::record_version_pieces || bytes[3] == idem::record_version_marker_why);
    FUZZ_CHECK(inside(record.pieces.id, bytes));
    FUZZ_CHECK(inside(record.pieces.stored_sizes, bytes));
    if (record.pieces.count != 0) {
        // every piece holds some of the body, the last the rest
        std::uint64_t total = 0;
        for (std::uint32_t i = 0; i < record.pieces.count; i++) {
            FUZZ_CHECK(record.pieces.plain_size(i) != 0 && record.pieces.plain_size(i) <= record.pieces.size);
            total += record.pieces.plain_size(i);
            (void)record.pieces.stored_size(i);
        }
        FUZZ_CHECK(total == record.pieces.body_size);
    }
    FUZZ_CHECK(static_cast<std::uint8_t>(bytes[4]) == static_cast<std::uint8_t>(record.kind));
    FUZZ_CHECK(std::memcmp(bytes.data() + 5, record.fingerprint.data(), 32) == 0);
    FUZZ_CHECK(inside(record.token, bytes));
    FUZZ_CHECK(inside(record.headers, bytes));
    FUZZ_CHECK(inside(record.body, bytes));
    FUZZ_CHECK(inside(record.trailers, bytes));
    FUZZ_CHECK((record.flags & ~idem::known_response_flags) == 0);
    FUZZ_CHECK(record.token.size() <= idem::max_token_length);
    if (record.kind != RecordKind::response) {
        FUZZ_CHECK(record.header_count == 0 && record.headers.empty() && record.body.empty());
        FUZZ_CHECK(record.flags == 0 && record.trailer_count == 0 && record.trailers.empty());
    }
    if (record.kind != RecordKind::claim) {
        FUZZ_CHECK(record.token.empty());
    }

    // Exactly header_count headers, back to back, covering the header block.
    idem::HeaderReader reader(record);
    Header h;
    std::size_t count = 0;
    std::size_t covered = 0;
    unsigned s = 0;
    while (reader.next(h)) {
        FUZZ_CHECK(inside(h.name, record.headers));
        FUZZ_CHECK(inside(h.value, record.headers));
        s += sum(h.name) + sum(h.value);
        covered += 2 + h.name.size() + 4 + h.value.size();
        ++count;
        FUZZ_CHECK(count <= record.header_count);
    }
    FUZZ_CHECK(count == record.header_count);
    FUZZ_CHECK(covered == record.headers.size());
    FUZZ_CHECK(!reader.next(h));  // and it stays done
    s += sum(record.token) + sum(record.body);
    (void)s;

    check_round_trip(bytes, record);

    // Self-delimiting: the bytes less the last one are not a record.
    FUZZ_CHECK(!idem::decode_record(bytes.substr(0, bytes.size() - 1)));
}

// The other direction: records of each kind built by the encoders from the
// input decode to what was encoded.
void check_encode(std::string_view bytes)
{
    idem::Digest fp{};
    for (std::size_t i = 0; i < fp.size() && i < bytes.size(); ++i) {
        fp[i] = static_cast<std::uint8_t>(bytes[bytes.size() - 1 - i]);
    }
    const std::uint16_t status =
        bytes.size() < 2 ? 200
                         : static_cast<std::uint16_t>((static_cast<unsigned char>(bytes[0]) << 8)
                                                      | static_cast<unsigned char>(bytes[1]));

    if (bytes.size() > idem::max_token_length) {
        char none[1];
        FUZZ_CHECK(idem::claim_size(bytes) == 0 && idem::encode_claim(fp, bytes, none) == 0);
    }
    const std::string_view token = bytes.substr(0, idem::max_token_length);
    std::vector<char> claim(idem::claim_size(token));
    FUZZ_CHECK(idem::encode_claim(fp, token, claim.data()) == claim.size());
    std::optional<Record> r = idem::decode_record(std::string_view(claim.data(), claim.size()));
    FUZZ_CHECK(r && r->kind == RecordKind::claim && r->fingerprint == fp && r->token == token);

    std::vector<char> unrep(idem::unreplayable_size);
    FUZZ_CHECK(idem::encode_unreplayable(fp, status, unrep.data()) == unrep.size());
    r = idem::decode_record(std::string_view(unrep.data(), unrep.size()));
    FUZZ_CHECK(r && r->kind == RecordKind::unreplayable && r->fingerprint == fp
               && r->status == status && r->why == idem::MarkerWhy::unsaid);
    // a marker that says why, whatever the reason's value (a later release's too)
    const auto why = static_cast<idem::MarkerWhy>(bytes.empty() ? 1 : static_cast<unsigned char>(bytes[0]));
    std::vector<char> said(idem::unreplayable_why_size);
    const std::size_t said_size = idem::encode_unreplayable(fp, status, why, said.data());
    FUZZ_CHECK(said_size == (why == idem::MarkerWhy::unsaid ? idem::unreplayable_size : said.size()));
    r = idem::decode_record(std::string_view(said.data(), said_size));
    FUZZ_CHECK(r && r->kind == RecordKind::unreplayable && r->fingerprint == fp && r->status == status
               && r->why == why);

    // Headers: a length byte for the name, one for the value, then those
    // bytes (cut short at the end), up to 16 of them; the rest is the body.
    std::vector<Header> headers;
    std::string_view rest = bytes;
    while (rest.size() >= 2 && headers.size() < 16 && (rest[0] & 1) == 0) {
        const std::size_t name_len = static_cast<unsigned char>(rest[0]) >> 1;
        const std::size_t value_len = static_cast<unsigned char>(rest[1]);
        rest.remove_prefix(2);
        Header h;
        h.name = rest.substr(0, name_len);
        rest.remove_prefix(h.name.size());
        h.value = rest.substr(0, value_len);
        rest.remove_prefix(h.value.size());
        headers.push_back(h);
    }
    const std::string_view body = rest;
    // half the inputs with a status a response may have, so that the checks
    // below run on more than the refusal
    const std::uint16_t response_status = bytes.size() % 2 == 0 ? static_cast<std::uint16_t>(100 + status % 500) : status;
    const std::size_t size = idem::response_size(headers.data(), headers.size(), body.size());
    FUZZ_CHECK(size != 0);
    std::vector<char> response(size);
    char* at = idem::encode_response_head(response.data(), fp, response_status, headers.data(),
                                          headers.size(), body.size());
    FUZZ_CHECK(at != nullptr && at + body.size() == response.data() + size);
    if (!body.empty()) {
        std::memcpy(at, body.data(), body.size());
    }
    idem::RecordFlaw flaw = idem::RecordFlaw::none;
    r = idem::decode_record(std::string_view(response.data(), response.size()), &flaw);
    FUZZ_CHECK(r.has_value() == sendable(response_status, headers));
    FUZZ_CHECK(r.has_value() == (flaw == idem::RecordFlaw::none));
    // the capture's check (replayable.hpp) is the decoder's: the same flaw
    FUZZ_CHECK(idem::response_flaw(response_status, headers.data(), headers.size()) == flaw);
    if (!r) {
        return;
    }
    FUZZ_CHECK(r->kind == RecordKind::response && r->fingerprint == fp
               && r->status == response_status && r->header_count == headers.size() && r->body == body);
    idem::HeaderReader reader(*r);
    Header h;
    for (const Header& expected : headers) {
        FUZZ_CHECK(reader.next(h));
        FUZZ_CHECK(h.name == expected.name && h.value == expected.value);
    }
    FUZZ_CHECK(!reader.next(h));
}


// The largest plain record the fuzzer lets a compressed one open into.
constexpr std::size_t max_fuzz_plain = 1 << 20;

void check_compressed(std::string_view bytes)
{
    static idem::RecordInflater inflater;
    const std::optional<idem::CompressedHead> head = idem::compressed_head(bytes);
    if (!head || head->plain_size > max_fuzz_plain) {
        return;
    }
    FUZZ_CHECK(inside(head->frame, bytes));
    std::vector<char> out(head->plain_size);  // exactly the room stated: ASan sees any write past it
    const std::optional<std::string_view> plain = inflater.inflate(bytes, *head, out.data());
    if (!plain) {
        return;
    }
    FUZZ_CHECK(plain->size() == head->plain_size && plain->data() == out.data());
    FUZZ_CHECK(plain->substr(0, 3) == "IDM" && ((*plain)[3] == 1 || (*plain)[3] == 2));
    FUZZ_CHECK(plain->substr(4, 33) == bytes.substr(4, 33));  // the kind and the fingerprint, as outside the frame
    const std::optional<Record> record = idem::decode_record(*plain);
    if (record) {
        FUZZ_CHECK(record->kind == RecordKind::response && record->status == head->status);
        check_record(*plain, *record);
    }
}

// A plain response record that compresses opens back into itself.
void check_compression_round_trip(std::string_view bytes, const Record& record)
{
    static idem::RecordCompressor compressor(idem::record_compression_level);
    static idem::RecordInflater inflater;
    if (record.kind != RecordKind::response) {
        return;
    }
    std::vector<char> packed(idem::RecordCompressor::bound(bytes.size()));
    const std::size_t n = compressor.compress(bytes, packed.data());
    if (n == 0) {
        return;
    }
    FUZZ_CHECK(n < bytes.size());
    const std::string_view compressed(packed.data(), n);
    const std::optional<idem::CompressedHead> head = idem::compressed_head(compressed);
    FUZZ_CHECK(head && head->plain_size == bytes.size() && head->status == record.status);
    std::vector<char> out(head->plain_size);
    const std::optional<std::string_view> plain = inflater.inflate(compressed, *head, out.data());
    FUZZ_CHECK(plain && *plain == bytes);
}

}  // namespace

// Pieces (pieces.hpp): a piece read from the input keeps its views inside
// it and rebuilds its head; the input as a look at a list of pieces is
// read without a read outside it, and a look made from the list passes.
void check_pieces(std::string_view bytes)
{
    if (std::optional<idem::Piece> piece = idem::decode_piece(bytes)) {
        FUZZ_CHECK(inside(piece->id, bytes) && inside(piece->payload, bytes));
        char head[idem::piece_head_size];
        idem::encode_piece_head(head, piece->id, piece->index, piece->form);
        FUZZ_CHECK(std::memcmp(head, bytes.data(), sizeof head) == 0);
    }
    std::string id(idem::pieces_id_size, 'p');
    std::memcpy(id.data(), bytes.data(), std::min(bytes.size(), id.size()));
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(bytes.size() % 7);
    std::string sizes(4 * count, '\0');
    for (std::uint32_t i = 0; i < count; i++) {
        idem::put_be<std::uint32_t>(sizes.data() + 4 * i, 100 + i);
    }
    idem::PieceList list;
    list.id = id;
    list.count = count;
    list.size = 1000;
    list.body_size = 1000 * (count - 1) + 1 + bytes.size() % 1000;
    list.stored_sizes = sizes;
    FUZZ_CHECK(idem::first_bad_piece(list, bytes, bytes.size() % 2 == 0) <= count);
    std::string look;
    for (std::uint32_t i = 0; i < count; i++) {
        char value[idem::piece_head_size];
        idem::encode_piece_head(value, id, i, idem::piece_form_plain);
        char entry[idem::piece_look_entry_size];
        idem::encode_piece_look(entry, list.stored_size(i), {value, sizeof value});
        look.append(entry, sizeof entry);
    }
    FUZZ_CHECK(idem::first_bad_piece(list, look, false) == count);
    // a piece the store does not have: no bytes at all, not even a pointer
    char absent[idem::piece_look_entry_size];
    idem::encode_piece_look(absent, idem::absent_piece, std::string_view{});
    FUZZ_CHECK(idem::first_bad_piece(list, std::string_view(absent, sizeof absent), false) == 0);

    // a record listing them, with the input's first bytes as its headers' names
    std::vector<Header> headers;
    if (bytes.size() >= 2) {
        headers.push_back({bytes.substr(0, 1), bytes.substr(1, bytes.size() % 32)});
    }
    const std::size_t size = idem::pieces_record_size(headers.data(), headers.size(), {}, count);
    FUZZ_CHECK(size != 0);
    std::vector<char> out(size);
    FUZZ_CHECK(idem::encode_pieces_record(out.data(), idem::Digest{}, 201, headers.data(), headers.size(), {}, list)
               == size);
    std::optional<Record> r = idem::decode_record(std::string_view(out.data(), out.size()));
    FUZZ_CHECK(r.has_value() == sendable(201, headers));
    if (r) {
        FUZZ_CHECK(r->pieces.count == count && r->pieces.id == id && r->pieces.body_size == list.body_size
                   && r->pieces.stored_sizes == sizes && r->header_count == headers.size());
    }
}

// What a location lets a replay hold (decide.hpp's ReplayLimits), against
// any value: what the decision replays is within the limits, whatever its
// kind; and bytes with the magic that do not decode are never taken for
// someone else's value (503) but for a damaged record of ours (410).
void check_limits(std::string_view bytes)
{
    const std::size_t max_body = bytes.empty() ? 0 : static_cast<unsigned char>(bytes.back()) * 64;
    const idem::ReplayLimits limits{max_body, max_body / 2};
    Record record{};
    idem::Unusable why = idem::Unusable::no;
    idem::Digest fingerprint{};
    if (bytes.size() >= 37) {
        std::memcpy(fingerprint.data(), bytes.data() + 5, fingerprint.size());
    }
    idem::Outcome decided = idem::decide_stored(bytes, fingerprint, record, why);
    decided = idem::decide_limits(decided, record, limits, why);
    if (decided == idem::Outcome::replayed) {
        const bool pieces = record.pieces.count != 0;
        FUZZ_CHECK((pieces ? record.pieces.body_size : record.body.size()) <= limits.max_body);
        FUZZ_CHECK(!pieces || record.pieces.size <= limits.max_piece);
    }
    if (bytes.substr(0, 3) == "IDM") {
        FUZZ_CHECK(decided != idem::Outcome::unavailable);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    // libFuzzer's buffer is a heap block of exactly `size` bytes: ASan
    // reports any read past it.
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const std::optional<Record> record = idem::decode_record(bytes);
    if (record) {
        check_record(bytes, *record);
        check_compression_round_trip(bytes, *record);
    }
    check_compressed(bytes);
    check_encode(bytes);
    check_pieces(bytes);
    check_limits(bytes);
    return 0;
}
