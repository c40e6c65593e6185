// redis/resp.cpp — see resp.hpp.

#include "resp.hpp"

#include <cstring>

namespace idem::redis {
namespace {

std::size_t digits(std::size_t n) noexcept
{
    std::size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

char* write_number(char* out, std::size_t n) noexcept
{
    std::size_t d = digits(n);
    for (std::size_t i = d; i > 0; i--) {
        out[i - 1] = static_cast<char>('0' + n % 10);
        n /= 10;
    }
    return out + d;
}

char* write_header(char* out, char type, std::size_t n) noexcept
{
    *out++ = type;
    out = write_number(out, n);
    *out++ = '\r';
    *out++ = '\n';
    return out;
}

}  // namespace

std::size_t resp_size(int argc, const std::size_t* argv_len) noexcept
{
    std::size_t size = 1 + digits(static_cast<std::size_t>(argc)) + 2;
    for (int i = 0; i < argc; i++) {
        size += 1 + digits(argv_len[i]) + 2 + argv_len[i] + 2;
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

}  // namespace idem::redis
