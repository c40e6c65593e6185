// redis/retry.hpp — what the Redis store does when a command it owes fails
// for now: which errors mean "not now", the backoff, the retry window, and
// how many OOM-refused bytes a worker may hold. Pure.
// See docs/design.md#store-protocols.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../timing.hpp"

namespace idem::redis {

// LOADING, BUSY, OOM, MISCONF, READONLY, MASTERDOWN, NOREPLICAS, CLUSTERDOWN,
// TRYAGAIN: nothing was done. Also when a fenced script reports one (Redis 7
// passes it on as is; older servers wrap it in "ERR Error running script").
bool is_transient_error(std::string_view error) noexcept;

// OOM (maxmemory with noeviction), as is or from a script: the one transient
// error that extending a key's TTL survives.
bool is_out_of_memory(std::string_view error) noexcept;

constexpr std::uint64_t retry_first_delay_ms = 100;
constexpr std::uint64_t retry_max_delay_ms = 1000;
constexpr Backoff retry_backoff{retry_first_delay_ms, retry_max_delay_ms};
// A response is tried for at least this: about what a lost connection was
// always given.
constexpr std::uint64_t store_retry_floor_ms = 20000;

// A response keeps its claim alive meanwhile, so its bound is a choice
// (lock_ttl, at least store_retry_floor_ms); a release or renewal is useless
// once the claim expired by itself: lock_ttl.
std::uint64_t retry_window_ms(std::uint64_t lock_ttl_ms, bool keeps_claim) noexcept;

// Each attempt renews the claim, at least three times per lock, as a running
// request does.
std::uint64_t renewing_max_delay_ms(std::uint64_t lock_ttl_ms) noexcept;

// 100 ms doubling up to 1 s (never above `max_delay`), until `window` after
// the first failure.
struct Retry {
    std::uint64_t started = 0;   // when the first failure came
    std::uint64_t deadline = 0;  // no attempt after this
    std::uint64_t delay = 0;     // the last wait
    unsigned failures = 0;

    // False when the window is over.
    bool next(std::uint64_t now, std::uint64_t window, std::uint64_t max_delay, std::uint64_t& wait) noexcept;
    // The next attempt is another schedule's (a store kept for memory).
    void count_failure(std::uint64_t now) noexcept;
};

// An OOM-refused response keeps its claim for idempotency_ttl (extending a
// key needs no memory); only the oldest kept one is tried this often, so
// Redis is asked no more while full, however many are kept.
constexpr std::uint64_t oom_probe_interval_ms = 1000;
// Each landing sends this many kept ones again: once Redis takes writes all
// go within a few round trips (doubling), and a Redis that refuses some is
// sent at most this many per write it took.
constexpr std::size_t kept_stores_per_landing = 2;

// 0 once it is over.
constexpr std::uint64_t kept_life_left(std::uint64_t until, std::uint64_t now) noexcept
{
    return until > now ? until - now : 0;
}

// idempotency_redis_oom_buffer: a record that does not fit what is left is
// not held, and the marker (a few dozen bytes) is kept instead.
class HoldBudget {
public:
    explicit HoldBudget(std::size_t limit = 0) noexcept : limit_(limit) {}

    bool take(std::size_t bytes) noexcept
    {
        if (held_ > limit_ || bytes > limit_ - held_) {
            return false;
        }
        held_ += bytes;
        return true;
    }
    void give_back(std::size_t bytes) noexcept { held_ -= bytes < held_ ? bytes : held_; }
    void set_limit(std::size_t limit) noexcept { limit_ = limit; }

    std::size_t held() const noexcept { return held_; }
    std::size_t limit() const noexcept { return limit_; }

private:
    std::size_t limit_;
    std::size_t held_ = 0;
};

}  // namespace idem::redis
