// redis/resp.hpp — writes RESP commands straight into the output buffer, and
// what of a command a debug line may show. Pure. Replaces
// redisFormatCommandArgv on the hot path: same bytes, no allocation or
// sprintf (formatting was a new request's largest cost;
// docs/performance.md#instructions-per-request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace idem::redis {

std::size_t resp_size(int argc, const std::size_t* argv_len) noexcept;

// Cheaper than resp_size; resp_write's end gives the exact size.
std::size_t resp_size_bound(int argc, const std::size_t* argv_len) noexcept;

// `out` has room for 20 bytes; returns its end.
char* write_decimal(char* out, std::uint64_t n) noexcept;

// `out` has room for resp_size bytes; returns its end.
char* resp_write(char* out, int argc, const char* const* argv, const std::size_t* argv_len) noexcept;

// Its name, and for a command on a store key the first eight hex digits of
// the key's hash. Never a value, a password, a script or the rest of the key.
struct CommandTrace {
    std::string_view name;
    std::string_view key_hash;  // empty: nothing of a key to show
};
CommandTrace trace_command(int argc, const char* const* argv, const std::size_t* argv_len) noexcept;

}  // namespace idem::redis
