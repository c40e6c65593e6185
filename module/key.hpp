// key.hpp — the client's idempotency key: parsing and validation of the
// header value (docs/design.md#key-syntax) and derivation of the Redis key from it.
// Pure: knows nothing of nginx or Redis I/O.
#pragma once

#include <cstddef>
#include <string_view>

namespace idem {

constexpr std::size_t max_key_length = 255;

enum class KeyStatus {
    ok,
    empty,      // "" or an empty header value
    too_long,   // more than max_key_length bytes after unquoting
    invalid,    // bytes outside visible ASCII, bad quoting or escapes
};

struct ParsedKey {
    KeyStatus status;
    std::size_t length;  // bytes written to `out` when status == ok
};

// Parses a header value in the bare form (visible ASCII 0x21-0x7e) or the
// RFC 8941 sf-string form ("..." with \" and \\ escapes, 0x20-0x7e inside).
// Both name the same key. `out` must have room for value.size() bytes.
ParsedKey parse_key(std::string_view value, char* out) noexcept;

// Hex digits appended to the prefix by derive_redis_key.
constexpr std::size_t key_hash_hex_length = 64;

// Writes prefix + hex(SHA-256(decimal(len(scope)) ":" scope key)) to `out`
// (room for prefix.size() + key_hash_hex_length) and returns its length,
// or 0 if OpenSSL fails.
// The raw key never appears in Redis; different scopes never collide.
std::size_t derive_redis_key(std::string_view prefix, std::string_view scope,
                             std::string_view key, char* out) noexcept;

}  // namespace idem
