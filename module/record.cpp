// record.cpp — encoding and strict decoding of records (layout in record.hpp).
// Decoding trusts nothing: every length is checked against the bytes there,
// and a response must be one that can be sent again.
#include "record.hpp"

#include <cstring>
#include <limits>

#include "big_endian.hpp"
#include "replayable.hpp"

namespace idem {
namespace {

constexpr std::size_t header_entry_overhead = 2 + 4;

// Fail, rather than overrun, when the input is short.
class Cursor {
public:
    explicit Cursor(std::string_view bytes) noexcept : rest_(bytes) {}

    bool take(std::size_t size, std::string_view& out) noexcept
    {
        if (rest_.size() < size) {
            return false;
        }
        out = rest_.substr(0, size);
        rest_.remove_prefix(size);
        return true;
    }

    template <typename Int>
    bool read(Int& out) noexcept
    {
        std::string_view bytes;
        if (!take(sizeof(Int), bytes)) {
            return false;
        }
        out = get_be<Int>(bytes.data());
        return true;
    }

    std::string_view rest() const noexcept { return rest_; }
    bool at_end() const noexcept { return rest_.empty(); }

private:
    std::string_view rest_;
};

char* put_bytes(char* out, const void* data, std::size_t size) noexcept
{
    if (size != 0) {
        std::memcpy(out, data, size);
    }
    return out + size;
}

char* put_prefix(char* out, RecordKind kind, const Digest& fingerprint,
                 std::uint8_t version = record_version) noexcept
{
    out = put_bytes(out, record_magic.data(), record_magic.size());
    out = put_be<std::uint8_t>(out, version);
    out = put_be<std::uint8_t>(out, static_cast<std::uint8_t>(kind));
    return put_bytes(out, fingerprint.data(), fingerprint.size());
}

bool read_header(Cursor& cursor, Header& out) noexcept
{
    std::uint16_t name_len = 0;
    std::uint32_t value_len = 0;
    return cursor.read(name_len) && cursor.take(name_len, out.name)
           && cursor.read(value_len) && cursor.take(value_len, out.value);
}

bool fits_header(const Header& header) noexcept
{
    return header.name.size() <= std::numeric_limits<std::uint16_t>::max()
           && header.value.size() <= std::numeric_limits<std::uint32_t>::max();
}

// `count` entries, walked now so that HeaderReader can rely on them adding up.
bool read_entries(Cursor& cursor, std::uint16_t count, std::string_view& out) noexcept
{
    const std::string_view start = cursor.rest();
    Header header;
    for (std::uint16_t i = 0; i < count; ++i) {
        if (!read_header(cursor, header)) {
            return false;
        }
    }
    out = start.substr(0, start.size() - cursor.rest().size());
    return true;
}

// Entries already walked by read_entries.
RecordFlaw entries_flaw(std::string_view entries, std::uint16_t count) noexcept
{
    HeaderReader reader(entries, count);
    Header header;
    while (reader.next(header)) {
        RecordFlaw flaw = header_flaw(header);
        if (flaw != RecordFlaw::none) {
            return flaw;
        }
    }
    return RecordFlaw::none;
}

// replayable.hpp's rule.
RecordFlaw stored_response_flaw(const Record& record) noexcept
{
    if (!replayable_status(record.status)) {
        return RecordFlaw::status;
    }
    RecordFlaw flaw = entries_flaw(record.headers, record.header_count);
    return flaw != RecordFlaw::none ? flaw : entries_flaw(record.trailers, record.trailer_count);
}

bool decode_response(Cursor& cursor, Record& record, bool extras) noexcept
{
    if (!cursor.read(record.status)) {
        return false;
    }
    if (extras && (!cursor.read(record.flags) || (record.flags & ~known_response_flags) != 0)) {
        return false;
    }
    std::uint32_t body_len = 0;
    if (!cursor.read(record.header_count) || !read_entries(cursor, record.header_count, record.headers)
        || !cursor.read(body_len) || !cursor.take(body_len, record.body)) {
        return false;
    }
    if (!extras) {
        return true;
    }
    // a response without flags or trailers is written as version 1: one
    // encoding per record
    return cursor.read(record.trailer_count) && read_entries(cursor, record.trailer_count, record.trailers)
           && (record.flags != 0 || record.trailer_count != 0);
}

// The cursor after the fingerprint.
bool decode_pieces(Cursor& cursor, Record& record) noexcept
{
    PieceList& p = record.pieces;
    std::uint8_t inner_version = 0;
    if (!cursor.take(pieces_id_size, p.id) || !cursor.read(p.count) || !cursor.read(p.size)
        || !cursor.read(p.body_size) || p.count == 0 || p.size == 0 || p.size > max_piece_bytes
        || p.count > max_piece_count
        || !cursor.take(std::size_t{4} * p.count, p.stored_sizes) || !cursor.read(inner_version)
        || (inner_version != record_version && inner_version != record_version_extras)
        || !decode_response(cursor, record, inner_version == record_version_extras) || !record.body.empty()) {
        return false;
    }
    // every piece but the last full, the last holding at least one byte
    return p.body_size > std::uint64_t{p.size} * (p.count - 1) && p.body_size <= std::uint64_t{p.size} * p.count;
}

std::size_t entries_size(const Header* entries, std::size_t count) noexcept
{
    if (count > std::numeric_limits<std::uint16_t>::max()) {
        return 0;
    }
    std::size_t size = 0;
    for (std::size_t i = 0; i < count; ++i) {
        if (!fits_header(entries[i])) {
            return 0;
        }
        size += header_entry_overhead + entries[i].name.size() + entries[i].value.size();
    }
    return size;
}

char* put_entries(char* out, const Header* entries, std::size_t count) noexcept
{
    out = put_be<std::uint16_t>(out, static_cast<std::uint16_t>(count));
    for (std::size_t i = 0; i < count; ++i) {
        out = put_be<std::uint16_t>(out, static_cast<std::uint16_t>(entries[i].name.size()));
        out = put_bytes(out, entries[i].name.data(), entries[i].name.size());
        out = put_be<std::uint32_t>(out, static_cast<std::uint32_t>(entries[i].value.size()));
        out = put_bytes(out, entries[i].value.data(), entries[i].value.size());
    }
    return out;
}

}  // namespace

std::optional<Record> decode_record(std::string_view bytes, RecordFlaw* flaw) noexcept
{
    RecordFlaw ignored = RecordFlaw::none;
    RecordFlaw& found = flaw != nullptr ? *flaw : ignored;
    found = RecordFlaw::none;
    Cursor cursor(bytes);
    std::string_view found_magic;
    std::uint8_t version = 0;
    std::uint8_t kind = 0;
    std::string_view fingerprint;
    if (!cursor.take(record_magic.size(), found_magic) || found_magic != record_magic) {
        return std::nullopt;
    }
    // From here on the bytes claim to be ours: what does not decode is a
    // record of ours damaged or cut short, never someone else's value.
    found = RecordFlaw::damaged;
    if (!cursor.read(version)) {
        return std::nullopt;
    }
    if (version > record_version_marker_why || version == record_version_compressed) {
        // version 3: compressed (compression.hpp), read once opened
        found = version == record_version_compressed ? RecordFlaw::compressed : RecordFlaw::newer_version;
        return std::nullopt;
    }
    if (version == 0 || !cursor.read(kind) || !cursor.take(Digest().size(), fingerprint)) {
        return std::nullopt;
    }

    Record record{};
    record.kind = static_cast<RecordKind>(kind);
    std::memcpy(record.fingerprint.data(), fingerprint.data(), fingerprint.size());

    const bool says_why = version == record_version_marker_why;
    if (says_why ? record.kind != RecordKind::unreplayable
                 : version != record_version && record.kind != RecordKind::response) {
        return std::nullopt;  // only a response has extras, or pieces; only a marker says why
    }
    bool decoded = false;
    switch (record.kind) {
    case RecordKind::claim: {
        std::uint8_t token_len = 0;  // one byte: never above max_token_length
        decoded = cursor.read(token_len) && cursor.take(token_len, record.token);
        break;
    }
    case RecordKind::response:
        decoded = version == record_version_pieces ? decode_pieces(cursor, record)
                                                   : decode_response(cursor, record, version == record_version_extras);
        break;
    case RecordKind::unreplayable: {
        std::uint8_t why = 0;
        // a marker that says nothing is written as version 1: one encoding per record
        decoded = cursor.read(record.status) && (!says_why || (cursor.read(why) && why != 0));
        record.why = static_cast<MarkerWhy>(why);
        break;
    }
    }
    if (!decoded || !cursor.at_end()) {
        return std::nullopt;
    }
    found = record.kind == RecordKind::response ? stored_response_flaw(record) : RecordFlaw::none;
    if (found != RecordFlaw::none) {
        return std::nullopt;
    }
    return record;
}

bool HeaderReader::next(Header& out) noexcept
{
    if (left_ == 0) {
        return false;
    }
    Cursor cursor(rest_);
    if (!read_header(cursor, out)) {
        left_ = 0;
        return false;
    }
    rest_ = cursor.rest();
    --left_;
    return true;
}

std::size_t claim_size(std::string_view token) noexcept
{
    if (token.size() > max_token_length) {
        return 0;
    }
    return record_prefix_size + 1 + token.size();
}

std::size_t encode_claim(const Digest& fingerprint, std::string_view token,
                         char* out) noexcept
{
    if (token.size() > max_token_length) {
        return 0;
    }
    char* end = put_prefix(out, RecordKind::claim, fingerprint);
    end = put_be<std::uint8_t>(end, static_cast<std::uint8_t>(token.size()));
    end = put_bytes(end, token.data(), token.size());
    return static_cast<std::size_t>(end - out);
}

std::size_t response_head_size(const Header* headers, std::size_t count,
                               const ResponseExtras& extras) noexcept
{
    const std::size_t entries = entries_size(headers, count);
    if (entries == 0 && count != 0) {
        return 0;
    }
    return record_prefix_size + 2 + (extras.any() ? 1 : 0) + 2 + entries + 4;
}

std::size_t response_tail_size(const ResponseExtras& extras) noexcept
{
    if (!extras.any()) {
        return 0;
    }
    const std::size_t entries = entries_size(extras.trailers, extras.trailer_count);
    return entries == 0 && extras.trailer_count != 0 ? 0 : 2 + entries;
}

std::size_t response_size(const Header* headers, std::size_t count,
                          std::size_t body_size, const ResponseExtras& extras) noexcept
{
    const std::size_t head = response_head_size(headers, count, extras);
    const std::size_t tail = response_tail_size(extras);
    if (head == 0 || (extras.any() && tail == 0) || body_size > std::numeric_limits<std::uint32_t>::max()) {
        return 0;
    }
    return head + body_size + tail;
}

char* encode_response_head(char* out, const Digest& fingerprint,
                           std::uint16_t status, const Header* headers,
                           std::size_t count, std::size_t body_size,
                           const ResponseExtras& extras) noexcept
{
    if (response_size(headers, count, body_size, extras) == 0) {
        return nullptr;
    }
    out = put_prefix(out, RecordKind::response, fingerprint,
                     extras.any() ? record_version_extras : record_version);
    out = put_be<std::uint16_t>(out, status);
    if (extras.any()) {
        out = put_be<std::uint8_t>(out, extras.flags);
    }
    out = put_entries(out, headers, count);
    return put_be<std::uint32_t>(out, static_cast<std::uint32_t>(body_size));
}

char* encode_response_tail(char* out, const ResponseExtras& extras) noexcept
{
    return extras.any() ? put_entries(out, extras.trailers, extras.trailer_count) : out;
}

std::size_t pieces_record_size(const Header* headers, std::size_t count, const ResponseExtras& extras,
                               std::uint32_t piece_count) noexcept
{
    const std::size_t head = response_head_size(headers, count, extras);
    const std::size_t tail = response_tail_size(extras);
    if (head == 0 || (extras.any() && tail == 0) || piece_count == 0 || piece_count > max_piece_count) {
        return 0;
    }
    return head + pieces_id_size + 4 + 4 + 8 + std::size_t{4} * piece_count + 1 + tail;
}

std::size_t encode_pieces_record(char* out, const Digest& fingerprint, std::uint16_t status, const Header* headers,
                                 std::size_t count, const ResponseExtras& extras, const PieceList& pieces) noexcept
{
    const std::size_t size = pieces_record_size(headers, count, extras, pieces.count);
    if (size == 0 || pieces.id.size() != pieces_id_size || pieces.stored_sizes.size() != std::size_t{4} * pieces.count) {
        return 0;
    }
    // The response part first, where it ends up, as a plain record of its
    // version without a body writes it; its prefix is then overwritten.
    const std::size_t list = pieces_id_size + 4 + 4 + 8 + pieces.stored_sizes.size();
    char* inner = out + list + 1;
    char* body_at = encode_response_head(inner, fingerprint, status, headers, count, 0, extras);
    if (body_at == nullptr) {
        return 0;
    }
    const char inner_version = inner[3];
    encode_response_tail(body_at, extras);
    char* p = put_prefix(out, RecordKind::response, fingerprint, record_version_pieces);
    p = put_bytes(p, pieces.id.data(), pieces.id.size());
    p = put_be<std::uint32_t>(p, pieces.count);
    p = put_be<std::uint32_t>(p, pieces.size);
    p = put_be<std::uint64_t>(p, pieces.body_size);
    p = put_bytes(p, pieces.stored_sizes.data(), pieces.stored_sizes.size());
    *p = inner_version;
    return size;
}

std::uint32_t PieceList::stored_size(std::uint32_t index) const noexcept
{
    return index < count ? get_be<std::uint32_t>(stored_sizes.data() + std::size_t{4} * index) : 0;
}

std::uint32_t PieceList::plain_size(std::uint32_t index) const noexcept
{
    if (index + 1 < count) {
        return size;
    }
    return index + 1 == count ? static_cast<std::uint32_t>(body_size - std::uint64_t{size} * index) : 0;
}

std::size_t encode_unreplayable(const Digest& fingerprint, std::uint16_t status,
                                char* out) noexcept
{
    return encode_unreplayable(fingerprint, status, MarkerWhy::unsaid, out);
}

std::size_t encode_unreplayable(const Digest& fingerprint, std::uint16_t status, MarkerWhy why,
                                char* out) noexcept
{
    const bool says = why != MarkerWhy::unsaid;
    char* end = put_prefix(out, RecordKind::unreplayable, fingerprint, says ? record_version_marker_why : record_version);
    end = put_be<std::uint16_t>(end, status);
    if (says) {
        end = put_be<std::uint8_t>(end, static_cast<std::uint8_t>(why));
    }
    return static_cast<std::size_t>(end - out);
}

HeaderLimit check_header_limits(const Header* headers, std::size_t count) noexcept
{
    if (count > max_record_headers) {
        return HeaderLimit::too_many;
    }
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < count; i++) {
        bytes += headers[i].name.size() + headers[i].value.size();
    }
    return bytes > max_record_header_bytes ? HeaderLimit::too_large : HeaderLimit::ok;
}

Record rebased(const Record& record, std::string_view from, const char* to) noexcept
{
    auto move = [&](std::string_view v) -> std::string_view {
        return v.empty() ? std::string_view{} : std::string_view{to + (v.data() - from.data()), v.size()};
    };
    Record copy = record;
    copy.token = move(record.token);
    copy.headers = move(record.headers);
    copy.body = move(record.body);
    copy.trailers = move(record.trailers);
    copy.pieces.id = move(record.pieces.id);
    copy.pieces.stored_sizes = move(record.pieces.stored_sizes);
    return copy;
}

}  // namespace idem
