// timing.hpp — the module's two timing rules, pure: the wait before trying
// again after a failure (Backoff: doubling from a first wait up to a
// longest), used by a Redis connection's reconnects, Sentinel's master
// lookups, the retries of what is owed Redis (redis/retry.hpp) and the
// looks of requests waiting for an original (wait.cpp); and the one
// timeout a Redis connection, shared by the locations that use it, applies
// (shortest_timeout).
#pragma once

#include <algorithm>
#include <cstdint>

namespace idem {

struct Backoff {
    std::uint64_t first;
    std::uint64_t longest;

    // The wait after one more failure, `last` being the wait before it
    // (0: this is the first failure).
    constexpr std::uint64_t after(std::uint64_t last) const noexcept
    {
        return last == 0 ? first : std::min(last * 2, longest);
    }
};

// The timeout of something shared by users of different timeouts: the
// shortest any of them has offered (0: none has yet).
constexpr std::uint64_t shortest_timeout(std::uint64_t held, std::uint64_t offered) noexcept
{
    return held == 0 || offered < held ? offered : held;
}

}  // namespace idem
