// compression.hpp — compressed response records (record version 3): a
// response record of version 1 or 2, its bytes after the fingerprint kept
// as one zstd frame. Pure: knows nothing of nginx or of the stores; the
// zstd contexts are the caller's to keep (one per worker), reused from
// record to record.
//
// Layout (integers big-endian; docs/design.md#compressed-records):
//   "IDM" 3 kind(1, response) fingerprint(32) status(2) form(1) ...
//   form 1, zstd:  plain_version(1) plain_size(4) frame
// where the frame opens into the plain_size bytes that follow the
// fingerprint in a record of plain_version (1 or 2), so opening it gives
// back that record exactly. The status and the fingerprint stay outside
// the frame: a mismatch, an inspection or a marker needs no inflating. A
// form this release does not know reads as a later release's record
// (RecordFlaw::newer_version). The frame carries zstd's checksum of its
// content: a record altered in the store does not open, it is never
// replayed as something else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fingerprint.hpp"
#include "record.hpp"

namespace idem {

class ZstdDictionary;

constexpr std::uint8_t compressed_form_zstd = 1;
// the record's prefix, then status form plain_version plain_size
constexpr std::size_t compressed_prefix_size = record_prefix_size + 2 + 1 + 1 + 4;

struct CompressedHead {
    Digest fingerprint;
    std::uint16_t status = 0;
    std::size_t plain_size = 0;  // the whole plain record's size, once opened
    std::string_view frame;
};

// The head of a version-3 record; nullopt for anything else. `flaw` tells
// why a record of version 3 was refused: a form or a plain version this
// release does not know (RecordFlaw::newer_version), or a head cut short
// or damaged (RecordFlaw::damaged); RecordFlaw::none: not version 3.
std::optional<CompressedHead> compressed_head(std::string_view bytes, RecordFlaw* flaw = nullptr) noexcept;

// When a compressed record is kept rather than the plain one: a response
// record of at least min_plain bytes whose compressed form saves at least
// a sixteenth of it and min_saving bytes (docs/performance.md#compressed-records).
constexpr std::size_t min_compressed_plain = 512;
// ... at least this with a dictionary, which makes small records pay
constexpr std::size_t min_compressed_plain_with_dictionary = 128;
constexpr std::size_t min_compressed(const ZstdDictionary* dictionary) noexcept
{
    return dictionary != nullptr ? min_compressed_plain_with_dictionary : min_compressed_plain;
}
constexpr std::size_t min_compression_saving = 64;
constexpr bool compression_pays(std::size_t plain, std::size_t packed) noexcept
{
    return packed + min_compression_saving <= plain && packed <= plain - plain / 16;
}
// zstd's level for records: 1, as fast as any and as small as level 3 on
// JSON (docs/performance.md#compressed-records).
constexpr int record_compression_level = 1;

// A zstd dictionary (idempotency_compress_dictionary): made from a
// dictionary file as `zstd --train` writes it, which names itself with an
// id that every frame compressed with it carries. The dictionary primes
// zstd with what a location's responses have in common, so that a small
// record compresses as well as a large one (docs/performance.md#dictionaries).
class ZstdDictionary {
public:
    // nullptr when `bytes` is not a zstd dictionary with an id (a raw
    // content dictionary has none), or out of memory.
    static ZstdDictionary* create(std::string_view bytes, int level) noexcept;
    ~ZstdDictionary();
    ZstdDictionary(const ZstdDictionary&) = delete;
    ZstdDictionary& operator=(const ZstdDictionary&) = delete;

    std::uint32_t id() const noexcept { return id_; }
    const void* cdict() const noexcept { return cdict_; }
    const void* ddict() const noexcept { return ddict_; }

private:
    ZstdDictionary() noexcept = default;
    std::uint32_t id_ = 0;
    void* cdict_ = nullptr;  // ZSTD_CDict
    void* ddict_ = nullptr;  // ZSTD_DDict
};

// The dictionaries a reader has: any of them opens the frames made with
// it; the first is the one new records are compressed with.
struct Dictionaries {
    ZstdDictionary* const* list = nullptr;
    std::size_t count = 0;

    const ZstdDictionary* find(std::uint32_t id) const noexcept;
    const ZstdDictionary* first() const noexcept { return count != 0 ? list[0] : nullptr; }
};

// The id of the dictionary a frame was compressed with; 0: none.
std::uint32_t frame_dictionary(std::string_view frame) noexcept;

class RecordCompressor {
public:
    explicit RecordCompressor(int level) noexcept : level_(level) {}
    ~RecordCompressor();
    RecordCompressor(const RecordCompressor&) = delete;
    RecordCompressor& operator=(const RecordCompressor&) = delete;

    static std::size_t bound(std::size_t plain_size) noexcept;
    // Writes the compressed form of `plain` (a response record of version
    // 1 or 2) to `out` (room for bound(plain.size())); its size, or 0 when
    // it is not worth keeping (the rule above), `plain` is not a response
    // record, or zstd fails (out of memory): the plain record is kept then.
    std::size_t compress(std::string_view plain, char* out, const ZstdDictionary* dictionary = nullptr) noexcept;

    // One zstd frame (with its checksum) of `in`, written to `out` (room
    // for frame_bound(in.size())); its size, 0 when zstd fails.
    static std::size_t frame_bound(std::size_t size) noexcept;
    std::size_t compress_frame(std::string_view in, char* out, std::size_t room,
                               const ZstdDictionary* dictionary = nullptr) noexcept;

private:
    int level_;
    void* cctx_ = nullptr;  // ZSTD_CCtx, made on first use
};

class RecordInflater {
public:
    RecordInflater() noexcept = default;
    ~RecordInflater();
    RecordInflater(const RecordInflater&) = delete;
    RecordInflater& operator=(const RecordInflater&) = delete;

    // Opens a compressed record into `out` (room for head.plain_size): the
    // plain record's bytes, or nullopt when the frame does not open into
    // exactly what the head says (altered, cut short, a checksum that does
    // not match, a dictionary it was made with that `dictionaries` lacks).
    std::optional<std::string_view> inflate(std::string_view record, const CompressedHead& head, char* out,
                                            const Dictionaries& dictionaries = {}) noexcept;

    // Opens one zstd frame into exactly `size` bytes at `out`; false when
    // it is not one frame declaring that size, or does not open into it.
    bool inflate_frame(std::string_view frame, char* out, std::size_t size,
                       const Dictionaries& dictionaries = {}) noexcept;

private:
    void* dctx_ = nullptr;  // ZSTD_DCtx, made on first use
};

}  // namespace idem
