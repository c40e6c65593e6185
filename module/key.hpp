// key.hpp — the client's idempotency key: parsing the header value and
// deriving the store key. Pure. See docs/design.md#key-syntax.
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

// Bare (visible ASCII 0x21-0x7e) or RFC 8941 sf-string ("..." with
// \" and \\ escapes, 0x20-0x7e inside); both name the same key. `out` has
// room for value.size() bytes.
ParsedKey parse_key(std::string_view value, char* out) noexcept;

constexpr std::size_t key_hash_hex_length = 64;

// prefix + hex(SHA-256(decimal(len(scope)) ":" scope key)), `out` having room
// for prefix.size() + key_hash_hex_length; 0 if OpenSSL fails. The raw key
// never reaches the store; different scopes never collide.
std::size_t derive_redis_key(std::string_view prefix, std::string_view scope,
                             std::string_view key, char* out) noexcept;

}  // namespace idem
