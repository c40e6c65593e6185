// record.hpp — the versioned binary codec of what is kept under a store key:
// a claim, a response, or an unreplayable marker. Pure: no nginx or Redis.
// Who frees a record's bytes is record_bytes.hpp's. See
// docs/design.md#how-it-works. The layout is stored data, so it stays here:
// Layout (all integers big-endian):
//   "IDM" version(1) kind(1) fingerprint(32)
//   claim:        token_len(1) token
//   response:     status(2) [flags(1)] header_count(2)
//                 { name_len(2) name value_len(4) value } * header_count
//                 body_len(4) body
//                 [trailer_count(2) { name_len(2) name value_len(4) value } * trailer_count]
//   unreplayable: status(2) [why(1)]
// Version 2 adds the bracketed parts; a response without them is written as
// version 1, which every release reads. Version 5: a marker that says why
// (MarkerWhy); older releases read it as a later record: 410 all the same.
// Version 3: a response of version 1 or 2 compressed (compression.hpp).
// Version 4 is a response whose body is kept in pieces under keys of their
// own (pieces.hpp), its record the list of them:
//   "IDM" 4 kind(response) fingerprint(32) id(16) piece_count(4)
//   piece_size(4) body_size(8) { stored_size(4) } * piece_count
//   inner_version(1) status(2) [flags(1)] header_count(2) headers
//   body_len(4, always 0) [trailers]
// inner_version (1 or 2) says whether the bracketed parts are there.
// decode_record refuses anything else, and a response that must not be sent
// again as it stands (replayable.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fingerprint.hpp"

namespace idem {

constexpr std::string_view record_magic = "IDM";
constexpr std::uint8_t record_version = 1;           // what claims and plain responses are written as
constexpr std::uint8_t record_version_extras = 2;    // a response with flags or trailers
constexpr std::uint8_t record_version_compressed = 3;  // a response of version 1 or 2, compressed
constexpr std::uint8_t record_version_pieces = 4;      // a response whose body is kept in pieces
constexpr std::uint8_t record_version_marker_why = 5;  // an unreplayable marker that says why
constexpr std::size_t pieces_id_size = 16;             // what names one response's pieces
constexpr std::uint32_t max_piece_count = 4096;        // the most pieces one response is kept in
constexpr std::uint32_t max_piece_bytes = 64 * 1024 * 1024;  // the most a piece holds (idempotency_piece_size)
constexpr std::size_t record_prefix_size = 3 + 1 + 1 + 32;

// A response with more headers or header bytes is delivered but not stored
// (its retries get 410).
constexpr std::size_t max_record_headers = 100;
constexpr std::size_t max_record_header_bytes = 64 * 1024;
constexpr std::size_t max_token_length = 255;

// What a compressed record may open into (compression.hpp).
constexpr std::size_t max_plain_record(std::size_t max_body) noexcept
{
    return max_body + 4 * max_record_header_bytes;
}

enum class RecordKind : std::uint8_t { claim = 1, response = 2, unreplayable = 3 };

// Stored: a value keeps its meaning for good. An unknown value (a later
// release's) is kept as it was read.
enum class MarkerWhy : std::uint8_t { unsaid = 0, bad_status = 1, bad_header_name = 2, bad_header_value = 3 };

struct Header {
    std::string_view name;
    std::string_view value;
};

// What a replay must repeat for the filters after the capture to treat the
// response alike.
enum ResponseFlag : std::uint8_t {
    allow_ranges = 1,     // the range filter may answer a Range request from it
    single_range = 2,     // ... with one range only
    expect_trailers = 4,  // trailers follow the body (gRPC)
};
constexpr std::uint8_t known_response_flags = allow_ranges | single_range | expect_trailers;

struct ResponseExtras {
    std::uint8_t flags = 0;
    const Header* trailers = nullptr;
    std::size_t trailer_count = 0;

    bool any() const noexcept { return flags != 0 || trailer_count != 0; }
};

// Each piece holds `size` body bytes but the last, which holds the rest;
// stored_sizes: each one's size in the store, big-endian 32 bits each.
struct PieceList {
    std::string_view id;
    std::uint32_t count = 0;  // 0: the body is in the record itself
    std::uint32_t size = 0;
    std::uint64_t body_size = 0;
    std::string_view stored_sizes;

    std::uint32_t stored_size(std::uint32_t index) const noexcept;
    std::uint32_t plain_size(std::uint32_t index) const noexcept;
};

// A decoded record; every view points into the decoded bytes.
struct Record {
    RecordKind kind;
    Digest fingerprint;
    std::string_view token;       // claim
    std::uint16_t status = 0;     // response, unreplayable
    MarkerWhy why = MarkerWhy::unsaid;  // unreplayable: what the marker says
    std::uint8_t flags = 0;       // response: ResponseFlag bits
    std::uint16_t header_count = 0;
    std::string_view headers;     // response: the encoded header entries
    std::string_view body;        // response
    std::uint16_t trailer_count = 0;
    std::string_view trailers;    // response: the encoded trailer entries
    PieceList pieces;             // response of version 4: `body` is empty, the body is there
};

// Later releases keep claims in a version every release reads, so a record
// of a newer version is a stored answer (410), never one to execute again.
// A value with the magic that does not decode is ours, damaged: 410, never
// 503 as someone else's value.
enum class RecordFlaw : std::uint8_t { none, status, header_name, header_value, newer_version, compressed, damaged };

// `flaw` tells a refused record from bytes that are not a record (none: no magic).
std::optional<Record> decode_record(std::string_view bytes, RecordFlaw* flaw = nullptr) noexcept;

// Every view moved from `from` to a copy of those bytes at `to`.
Record rebased(const Record& record, std::string_view from, const char* to) noexcept;

class HeaderReader {
public:
    explicit HeaderReader(const Record& record) noexcept
        : rest_(record.headers), left_(record.header_count) {}
    HeaderReader(std::string_view entries, std::uint16_t count) noexcept
        : rest_(entries), left_(count) {}
    static HeaderReader trailers(const Record& record) noexcept
    {
        return {record.trailers, record.trailer_count};
    }
    bool next(Header& out) noexcept;

private:
    std::string_view rest_;
    std::uint16_t left_;
};

enum class HeaderLimit { ok, too_many, too_large };
HeaderLimit check_header_limits(const Header* headers, std::size_t count) noexcept;

// Both return 0 for a token longer than max_token_length.
std::size_t claim_size(std::string_view token) noexcept;
std::size_t encode_claim(const Digest& fingerprint, std::string_view token,
                         char* out) noexcept;

// 0 if the layout cannot hold them (over 65535 headers or trailers, a name
// over 65535 bytes, a value or body over 4 GiB - 1).
std::size_t response_size(const Header* headers, std::size_t count,
                          std::size_t body_size, const ResponseExtras& extras = {}) noexcept;
std::size_t response_head_size(const Header* headers, std::size_t count,
                               const ResponseExtras& extras = {}) noexcept;
std::size_t response_tail_size(const ResponseExtras& extras) noexcept;
// Returns where the caller copies exactly body_size body bytes, or nullptr,
// writing nothing, when response_size() would be 0.
char* encode_response_head(char* out, const Digest& fingerprint,
                           std::uint16_t status, const Header* headers,
                           std::size_t count, std::size_t body_size,
                           const ResponseExtras& extras = {}) noexcept;
char* encode_response_tail(char* out, const ResponseExtras& extras) noexcept;

// 0 when the layout cannot hold it / nothing written.
std::size_t pieces_record_size(const Header* headers, std::size_t count, const ResponseExtras& extras,
                               std::uint32_t piece_count) noexcept;
std::size_t encode_pieces_record(char* out, const Digest& fingerprint, std::uint16_t status, const Header* headers,
                                 std::size_t count, const ResponseExtras& extras, const PieceList& pieces) noexcept;

constexpr std::size_t unreplayable_size = record_prefix_size + 2;
std::size_t encode_unreplayable(const Digest& fingerprint, std::uint16_t status,
                                char* out) noexcept;
// MarkerWhy::unsaid writes the plain marker.
constexpr std::size_t unreplayable_why_size = unreplayable_size + 1;
std::size_t encode_unreplayable(const Digest& fingerprint, std::uint16_t status, MarkerWhy why,
                                char* out) noexcept;

}  // namespace idem
