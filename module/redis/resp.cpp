// redis/resp.cpp — see resp.hpp.

#include "resp.hpp"

#include <cstring>

#include "../key.hpp"

namespace idem::redis {
namespace {

// Numbers are written two digits at a time from this table.
constexpr char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

std::size_t digits(std::uint64_t n) noexcept
{
    std::size_t d = 1;
    while (n >= 100) {
        n /= 100;
        d += 2;
    }
    return n >= 10 ? d + 1 : d;
}

// Most of a command's numbers (its argument count, the lengths of its
// fixed words) are below 100.
inline char* write_number(char* out, std::uint64_t n) noexcept
{
    if (n < 10) {
        *out = static_cast<char>('0' + n);
        return out + 1;
    }
    if (n < 100) {
        std::memcpy(out, &digit_pairs[2 * n], 2);
        return out + 2;
    }
    char* end = out + digits(n);
    char* p = end;
    while (n >= 100) {
        p -= 2;
        std::memcpy(p, &digit_pairs[2 * (n % 100)], 2);
        n /= 100;
    }
    if (n >= 10) {
        std::memcpy(p - 2, &digit_pairs[2 * n], 2);
    } else {
        p[-1] = static_cast<char>('0' + n);
    }
    return end;
}

inline char* write_header(char* out, char type, std::size_t n) noexcept
{
    *out++ = type;
    out = write_number(out, n);
    *out++ = '\r';
    *out++ = '\n';
    return out;
}

// "*" or "$", at most 20 digits, CRLF
constexpr std::size_t max_header = 1 + 20 + 2;

}  // namespace

char* write_decimal(char* out, std::uint64_t n) noexcept
{
    return write_number(out, n);
}

std::size_t resp_size(int argc, const std::size_t* argv_len) noexcept
{
    std::size_t size = 1 + digits(static_cast<std::size_t>(argc)) + 2;
    for (int i = 0; i < argc; i++) {
        size += 1 + digits(argv_len[i]) + 2 + argv_len[i] + 2;
    }
    return size;
}

std::size_t resp_size_bound(int argc, const std::size_t* argv_len) noexcept
{
    std::size_t size = max_header;
    for (int i = 0; i < argc; i++) {
        size += max_header + argv_len[i] + 2;
    }
    return size;
}

char* resp_write(char* out, int argc, const char* const* argv, const std::size_t* argv_len) noexcept
{
    out = write_header(out, '*', static_cast<std::size_t>(argc));
    for (int i = 0; i < argc; i++) {
        out = write_header(out, '$', argv_len[i]);
        std::memcpy(out, argv[i], argv_len[i]);
        out += argv_len[i];
        *out++ = '\r';
        *out++ = '\n';
    }
    return out;
}

CommandTrace trace_command(int argc, const char* const* argv, const std::size_t* argv_len) noexcept
{
    constexpr std::size_t shown = 8;
    if (argc < 1) {
        return {};
    }
    std::string_view name{argv[0], argv_len[0]};
    int key_at = name == "SET" || name == "PEXPIRETIME" || name == "PEXPIRE" || name == "DEL" ? 1 : name == "EVALSHA" || name == "EVAL" ? 3 : 0;
    if (key_at == 0 || key_at >= argc || argv_len[key_at] < key_hash_hex_length) {
        return {name, {}};
    }
    // A store key ends with the hex of its hash (key.hpp).
    std::string_view hash{argv[key_at] + argv_len[key_at] - key_hash_hex_length, key_hash_hex_length};
    for (char c : hash) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return {name, {}};
        }
    }
    return {name, hash.substr(0, shown)};
}

}  // namespace idem::redis
