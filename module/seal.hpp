// seal.hpp — encryption at rest of stored records: AES-256-GCM (OpenSSL)
// under the first configured key, bound to the record's Redis key as
// associated data, so that a Redis dump reveals no response and a record
// that was altered, or moved to another key, does not open. Older keys are
// kept for opening only (rotation). Pure: knows nothing of nginx.
//
// Envelope: "IDE" version(1) key_id(4) nonce(12) ciphertext tag(16)
// where key_id is the first 4 bytes of SHA-256(key).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace idem {

constexpr std::size_t secret_key_size = 32;

struct SecretKey {
    std::array<std::uint8_t, secret_key_size> bytes;
    std::array<std::uint8_t, 4> id;
};

// Parses a key file's content: 32 raw bytes, or 64 hex digits (surrounding
// whitespace ignored). Fills `key` (and its id); false when neither.
bool parse_secret_key(std::string_view content, SecretKey& key) noexcept;

constexpr std::size_t seal_overhead = 4 + 4 + 12 + 16;

bool is_sealed(std::string_view value) noexcept;

// A value that is no whole envelope but bears an envelope's marks: the
// magic with fewer bytes than an envelope has (cut short), or an
// envelope's size with one of `keys`' ids where the id goes (its magic
// altered; 2^-32 of another application's values per key look so by chance).
// A plain record is never one: the caller asks only of what does not decode.
bool seal_remnant(std::string_view value, const SecretKey* keys, std::size_t count) noexcept;

// Writes the envelope of `plain` to `out` (room for plain.size() +
// seal_overhead); false if OpenSSL fails.
bool seal(const SecretKey& key, std::string_view aad, std::string_view plain, char* out) noexcept;

enum class OpenStatus { ok, unknown_key, invalid };

// Opens an envelope with whichever of `keys` made it, into `out` (room for
// sealed.size() - seal_overhead); `length` gets the plaintext size.
OpenStatus open_sealed(const SecretKey* keys, std::size_t count, std::string_view aad, std::string_view sealed,
                       char* out, std::size_t& length) noexcept;

}  // namespace idem
