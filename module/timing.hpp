// timing.hpp — the module's two timing rules, pure: the backoff after a
// failure (reconnects, Sentinel lookups, owed retries, wait-group looks), and
// the one timeout a shared Redis connection applies.
#pragma once

#include <algorithm>
#include <cstdint>

namespace idem {

struct Backoff {
    std::uint64_t first;
    std::uint64_t longest;

    // `last`: the wait before this failure (0: the first).
    constexpr std::uint64_t after(std::uint64_t last) const noexcept
    {
        return last == 0 ? first : std::min(last * 2, longest);
    }
};

// The shortest any user has offered (0: none yet).
constexpr std::uint64_t shortest_timeout(std::uint64_t held, std::uint64_t offered) noexcept
{
    return held == 0 || offered < held ? offered : held;
}

}  // namespace idem
