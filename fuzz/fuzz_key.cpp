// fuzz_key.cpp — libFuzzer target: idem::parse_key on arbitrary header
// values, checked against a plain reference reading of docs/design.md#key-syntax
// and for
// round trips through both spellings; idem::derive_redis_key on the same
// bytes split into prefix, scope and key.
//
//   make fuzz                 (all targets; see the Makefile)
//   build/fuzz/fuzz_key -max_len=1024 build/fuzz/corpus/fuzz_key
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "key.hpp"

namespace {

using idem::KeyStatus;
using idem::ParsedKey;

// The reference: what the key must be, spelled out without the module's
// single pass. Either form, "invalid" before "empty" and "too_long".
ParsedKey reference_parse(std::string_view value, std::string& key)
{
    key.clear();
    if (value.empty()) {
        return {KeyStatus::empty, 0};
    }
    if (value.front() != '"') {
        for (unsigned char c : value) {
            if (c < 0x21 || c > 0x7e) {
                return {KeyStatus::invalid, 0};
            }
        }
        key.assign(value);
    } else {
        if (value.size() < 2 || value.back() != '"') {
            return {KeyStatus::invalid, 0};
        }
        const std::string_view inner = value.substr(1, value.size() - 2);
        for (std::size_t i = 0; i < inner.size(); ++i) {
            const unsigned char c = static_cast<unsigned char>(inner[i]);
            if (c == '\\') {
                if (i + 1 == inner.size() || (inner[i + 1] != '"' && inner[i + 1] != '\\')) {
                    return {KeyStatus::invalid, 0};
                }
                key.push_back(inner[++i]);
            } else if (c == '"' || c < 0x20 || c > 0x7e) {
                return {KeyStatus::invalid, 0};
            } else {
                key.push_back(static_cast<char>(c));
            }
        }
    }
    if (key.empty()) {
        return {KeyStatus::empty, 0};
    }
    if (key.size() > idem::max_key_length) {
        return {KeyStatus::too_long, 0};
    }
    return {KeyStatus::ok, key.size()};
}

// parse_key into a buffer of exactly value.size() bytes (its documented
// room), so that ASan sees any write past it.
ParsedKey parse(std::string_view value, std::string& key)
{
    std::vector<char> out(value.size());
    // A copy of exactly the value's size: reads past it are seen too.
    std::vector<char> in(value.begin(), value.end());
    const ParsedKey parsed = idem::parse_key(std::string_view(in.data(), in.size()), out.data());
    key.assign(out.data(), parsed.status == KeyStatus::ok ? parsed.length : 0);
    return parsed;
}

std::string quoted(std::string_view key)
{
    std::string q = "\"";
    for (char c : key) {
        if (c == '"' || c == '\\') {
            q.push_back('\\');
        }
        q.push_back(c);
    }
    q.push_back('"');
    return q;
}

void check_parse(std::string_view value)
{
    std::string key;
    const ParsedKey parsed = parse(value, key);

    std::string expected;
    const ParsedKey reference = reference_parse(value, expected);
    FUZZ_CHECK(parsed.status == reference.status);
    if (parsed.status != KeyStatus::ok) {
        FUZZ_CHECK(parsed.length == 0);
        return;
    }

    FUZZ_CHECK(parsed.length >= 1);
    FUZZ_CHECK(parsed.length <= idem::max_key_length);
    FUZZ_CHECK(parsed.length <= value.size());
    FUZZ_CHECK(key == expected);
    bool bare = true;
    for (unsigned char c : key) {
        FUZZ_CHECK(c >= 0x20 && c <= 0x7e);
        bare = bare && c != 0x20;
    }

    // The other spellings of the same key parse back to it. A key starting
    // with '"' has no bare spelling (that byte opens the sf-string form).
    if (bare && key.front() != '"') {
        std::string again;
        const ParsedKey reparsed = parse(key, again);
        FUZZ_CHECK(reparsed.status == KeyStatus::ok);
        FUZZ_CHECK(again == key);
    }
    std::string again;
    const ParsedKey requoted = parse(quoted(key), again);
    FUZZ_CHECK(requoted.status == KeyStatus::ok);
    FUZZ_CHECK(again == key);
}

// data[0] and data[1] are the lengths of the prefix and the scope taken from
// the bytes after them (as much as there is); the rest is the key.
void check_derive(const std::uint8_t* data, std::size_t size)
{
    if (size < 2) {
        return;
    }
    std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
    const std::string_view prefix = rest.substr(0, data[0]);
    rest.remove_prefix(prefix.size());
    const std::string_view scope = rest.substr(0, data[1]);
    rest.remove_prefix(scope.size());
    const std::string_view key = rest;

    std::vector<char> out(prefix.size() + idem::key_hash_hex_length);
    const std::size_t n = idem::derive_redis_key(prefix, scope, key, out.data());
    FUZZ_CHECK(n == prefix.size() + idem::key_hash_hex_length);
    FUZZ_CHECK(std::memcmp(out.data(), prefix.data(), prefix.size()) == 0);
    for (std::size_t i = prefix.size(); i < n; ++i) {
        const char c = out[i];
        FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }

    // The hash is SHA-256 over decimal(len(scope)) ":" scope key.
    const std::string framed =
        std::to_string(scope.size()) + ":" + std::string(scope) + std::string(key);
    const idem::Digest digest = idem::sha256(framed);
    char hex[2 * 32];
    idem::to_hex(digest.data(), digest.size(), hex);
    FUZZ_CHECK(std::memcmp(out.data() + prefix.size(), hex, sizeof hex) == 0);

    // Moving the scope/key boundary changes the Redis key.
    if (!key.empty()) {
        const std::string_view all(reinterpret_cast<const char*>(data) + 2 + prefix.size(),
                                   scope.size() + key.size());
        std::vector<char> moved(prefix.size() + idem::key_hash_hex_length);
        FUZZ_CHECK(idem::derive_redis_key(prefix, all.substr(0, scope.size() + 1),
                                          all.substr(scope.size() + 1), moved.data())
                   == n);
        FUZZ_CHECK(std::memcmp(moved.data(), out.data(), n) != 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    check_parse(std::string_view(reinterpret_cast<const char*>(data), size));
    check_derive(data, size);
    return 0;
}
