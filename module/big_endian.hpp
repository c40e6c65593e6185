// big_endian.hpp — how every stored format writes its numbers. Pure.
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem {

// Returns their end.
template <typename T>
char* put_be(char* out, T value) noexcept
{
    const auto v = static_cast<std::uint64_t>(value);
    for (std::size_t i = sizeof(T); i-- > 0;) {
        *out++ = static_cast<char>((v >> (8 * i)) & 0xff);
    }
    return out;
}

// The caller has checked the bytes are there.
template <typename T>
T get_be(const char* in) noexcept
{
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        v = (v << 8) | static_cast<unsigned char>(in[i]);
    }
    return static_cast<T>(v);
}

}  // namespace idem
