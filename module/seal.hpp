// seal.hpp — encryption at rest: AES-256-GCM under the first key, bound to the
// record's Redis key as associated data, so a dump reveals no response and a
// record altered or moved to another key does not open. Older keys only
// open (rotation). Pure. See docs/design.md#sealed-at-rest.
// Envelope: "IDE" version(1) key_id(4: SHA-256(key)[0..4]) nonce(12) ciphertext tag(16)
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

// 32 raw bytes, or 64 hex digits (surrounding whitespace ignored).
bool parse_secret_key(std::string_view content, SecretKey& key) noexcept;

constexpr std::size_t seal_overhead = 4 + 4 + 12 + 16;

bool is_sealed(std::string_view value) noexcept;

// Cut short (magic, fewer bytes than an envelope), or an envelope's size with
// one of `keys`' ids where the id goes (magic altered; 2^-32 of foreign
// values per key by chance). Asked only of what does not decode as a record.
bool seal_remnant(std::string_view value, const SecretKey* keys, std::size_t count) noexcept;

// `out` has room for plain.size() + seal_overhead; false if OpenSSL fails.
bool seal(const SecretKey& key, std::string_view aad, std::string_view plain, char* out) noexcept;

enum class OpenStatus { ok, unknown_key, invalid };

// `out` has room for sealed.size() - seal_overhead.
OpenStatus open_sealed(const SecretKey* keys, std::size_t count, std::string_view aad, std::string_view sealed,
                       char* out, std::size_t& length) noexcept;

}  // namespace idem
