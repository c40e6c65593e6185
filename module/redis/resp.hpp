// redis/resp.hpp — writes Redis commands in RESP (arrays of bulk strings)
// straight into the connection's output buffer, and says what of a command
// a debug line may show. Pure. Replaces hiredis's
// redisFormatCommandArgv on the hot path: same bytes, no intermediate
// allocation and no sprintf (which made formatting the largest cost of a
// new request; see docs/performance.md#instructions-per-request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

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

// What the debug trace shows of a command: its name, and for a command
// about one of the module's store keys (SET, PEXPIRETIME, EVALSHA, EVAL)
// the first eight hex digits of that key's hash. Never a value, a
// password, a script or the rest of the key.
struct CommandTrace {
    std::string_view name;
    std::string_view key_hash;  // empty: nothing of a key to show
};
CommandTrace trace_command(int argc, const char* const* argv, const std::size_t* argv_len) noexcept;

}  // namespace idem::redis
