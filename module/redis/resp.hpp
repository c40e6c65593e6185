// redis/resp.hpp — writes Redis commands in RESP (arrays of bulk strings)
// straight into the connection's output buffer. Pure. Replaces hiredis's
// redisFormatCommandArgv on the hot path: same bytes, no intermediate
// allocation and no sprintf (which made formatting the largest cost of a
// new request; see README "Performance").
#pragma once

#include <cstddef>

namespace idem::redis {

// Bytes needed for one command of `argc` arguments of the given lengths.
std::size_t resp_size(int argc, const std::size_t* argv_len) noexcept;

// Writes the command at `out` (room for resp_size bytes); returns its end.
char* resp_write(char* out, int argc, const char* const* argv, const std::size_t* argv_len) noexcept;

}  // namespace idem::redis
