// compression.hpp — compressed response records (version 3): a record of
// version 1 or 2 with its bytes after the fingerprint as one zstd frame.
// Pure: no nginx or stores; the caller keeps the zstd contexts (one per
// worker). See docs/design.md#compressed-records. Layout (big-endian):
//   "IDM" 3 kind(1, response) fingerprint(32) status(2) form(1) ...
//   form 1, zstd:  plain_version(1) plain_size(4) frame
// Opening the frame gives back the plain record exactly. Status and
// fingerprint stay outside so a mismatch, inspection or marker needs no
// inflating. An unknown form reads as a later release's record. The frame
// carries zstd's checksum: a record altered in the store never replays.
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
constexpr std::size_t compressed_prefix_size = record_prefix_size + 2 + 1 + 1 + 4;

struct CompressedHead {
    Digest fingerprint;
    std::uint16_t status = 0;
    std::size_t plain_size = 0;  // the whole plain record's size, once opened
    std::string_view frame;
};

// nullopt for anything but version 3; `flaw`: newer_version (unknown form or
// plain version), damaged, or none (not version 3).
std::optional<CompressedHead> compressed_head(std::string_view bytes, RecordFlaw* flaw = nullptr) noexcept;

// A compressed record is kept only at min_plain bytes or more and when it
// saves a sixteenth and min_saving bytes (docs/performance.md#compressed-records).
constexpr std::size_t min_compressed_plain = 512;
// ... with a dictionary, which makes small records pay
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
// 1: as fast as any and as small as level 3 on JSON (docs/performance.md#compressed-records).
constexpr int record_compression_level = 1;

// Made from `zstd --train` output, which carries an id every frame made with
// it records; primes zstd so a small record compresses as well as a large
// one (docs/performance.md#dictionaries).
class ZstdDictionary {
public:
    // nullptr when `bytes` is not a zstd dictionary with an id (a raw content
    // dictionary has none), or out of memory.
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

// Any of them opens frames made with it; new records use the first.
struct Dictionaries {
    ZstdDictionary* const* list = nullptr;
    std::size_t count = 0;

    const ZstdDictionary* find(std::uint32_t id) const noexcept;
    const ZstdDictionary* first() const noexcept { return count != 0 ? list[0] : nullptr; }
};

// 0: none.
std::uint32_t frame_dictionary(std::string_view frame) noexcept;

class RecordCompressor {
public:
    explicit RecordCompressor(int level) noexcept : level_(level) {}
    ~RecordCompressor();
    RecordCompressor(const RecordCompressor&) = delete;
    RecordCompressor& operator=(const RecordCompressor&) = delete;

    static std::size_t bound(std::size_t plain_size) noexcept;
    // `out` has room for bound(plain.size()). 0, keeping the plain record, when
    // it does not pay, `plain` is not a response record, or zstd fails.
    std::size_t compress(std::string_view plain, char* out, const ZstdDictionary* dictionary = nullptr) noexcept;

    // With its checksum; `out` has room for frame_bound(in.size()). 0 when zstd fails.
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

    // `out` has room for head.plain_size. nullopt when the frame does not open
    // into exactly what the head says (altered, cut short, bad checksum, a
    // dictionary `dictionaries` lacks).
    std::optional<std::string_view> inflate(std::string_view record, const CompressedHead& head, char* out,
                                            const Dictionaries& dictionaries = {}) noexcept;

    // False unless it is one frame declaring `size` and opens into it.
    bool inflate_frame(std::string_view frame, char* out, std::size_t size,
                       const Dictionaries& dictionaries = {}) noexcept;

private:
    void* dctx_ = nullptr;  // ZSTD_DCtx, made on first use
};

}  // namespace idem
