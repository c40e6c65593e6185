// key.cpp — see key.hpp (docs/design.md#key-syntax).
#include "key.hpp"

#include <cstring>

#include "fingerprint.hpp"

namespace idem {
namespace {

bool is_visible_ascii(unsigned char c) noexcept
{
    return c >= 0x21 && c <= 0x7e;
}

// Visible ASCII plus space.
bool is_sf_string_char(unsigned char c) noexcept
{
    return c >= 0x20 && c <= 0x7e;
}

ParsedKey finish_key(std::size_t length) noexcept
{
    if (length == 0) {
        return {KeyStatus::empty, 0};
    }
    if (length > max_key_length) {
        return {KeyStatus::too_long, 0};
    }
    return {KeyStatus::ok, length};
}

ParsedKey parse_bare(std::string_view value, char* out) noexcept
{
    for (std::size_t i = 0; i < value.size(); ++i) {
        if (!is_visible_ascii(static_cast<unsigned char>(value[i]))) {
            return {KeyStatus::invalid, 0};
        }
        out[i] = value[i];
    }
    return finish_key(value.size());
}

// The closing quote must be the last byte: RFC 8941 parameters (";a=1")
// would make two spellings of one key, so they are refused, not ignored.
ParsedKey parse_sf_string(std::string_view value, char* out) noexcept
{
    std::size_t length = 0;
    for (std::size_t i = 1; i < value.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(value[i]);
        if (c == '"') {
            if (i + 1 != value.size()) {
                return {KeyStatus::invalid, 0};
            }
            return finish_key(length);
        }
        if (c == '\\') {
            if (++i == value.size()) {
                return {KeyStatus::invalid, 0};
            }
            const char escaped = value[i];
            if (escaped != '"' && escaped != '\\') {
                return {KeyStatus::invalid, 0};
            }
            out[length++] = escaped;
            continue;
        }
        if (!is_sf_string_char(c)) {
            return {KeyStatus::invalid, 0};
        }
        out[length++] = static_cast<char>(c);
    }
    return {KeyStatus::invalid, 0};  // no closing quote
}

}  // namespace

ParsedKey parse_key(std::string_view value, char* out) noexcept
{
    if (value.empty()) {
        return {KeyStatus::empty, 0};
    }
    if (value.front() == '"') {
        return parse_sf_string(value, out);
    }
    return parse_bare(value, out);
}

std::size_t derive_redis_key(std::string_view prefix, std::string_view scope,
                             std::string_view key, char* out) noexcept
{
    // The length prefix keeps scope "a" + key "bc" apart from "ab" + "c".
    char length_digits[24];
    std::size_t digit_count = 0;
    std::size_t n = scope.size();
    do {
        length_digits[sizeof length_digits - 1 - digit_count++] =
            static_cast<char>('0' + n % 10);
        n /= 10;
    } while (n != 0);

    Sha256 sha;
    sha.update({{length_digits + sizeof length_digits - digit_count, digit_count}, ":", scope, key});
    const Digest digest = sha.finish();
    if (!sha.ok()) {
        return 0;
    }

    if (!prefix.empty()) {
        std::memcpy(out, prefix.data(), prefix.size());
    }
    to_hex(digest.data(), digest.size(), out + prefix.size());
    return prefix.size() + key_hash_hex_length;
}

}  // namespace idem
