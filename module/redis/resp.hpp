// redis/resp.hpp — writes Redis commands in RESP (arrays of bulk strings)
// straight into the connection's output buffer. Pure. Replaces hiredis's
// redisFormatCommandArgv on the hot path: same bytes, no intermediate
// allocation and no sprintf (which made formatting the largest cost of a
// new request; see docs/performance.md#instructions-per-request).
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem::redis {

// Bytes needed for one command of `argc` arguments of the given lengths.
std::size_t resp_size(int argc, const std::size_t* argv_len) noexcept;

// At least the bytes of one such command, cheaper to find than resp_size:
// room to reserve before resp_write, whose end gives the exact size.
std::size_t resp_size_bound(int argc, const std::size_t* argv_len) noexcept;

// Writes `n` in decimal at `out` (room for 20 bytes); returns its end.
char* write_decimal(char* out, std::uint64_t n) noexcept;

// Writes the command at `out` (room for resp_size bytes); returns its end.
char* resp_write(char* out, int argc, const char* const* argv, const std::size_t* argv_len) noexcept;

}  // namespace idem::redis
