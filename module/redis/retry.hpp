// redis/retry.hpp — what the Redis store does when a command it owes Redis
// (storing a response, releasing a key, renewing a claim) fails for now:
// which error replies mean "not now" rather than "never", how long to wait
// before the next attempt (the module's one backoff, timing.hpp), and for
// how long to keep trying. Pure.
#pragma once

#include <cstdint>
#include <string_view>

#include "../timing.hpp"

namespace idem::redis {

// True for an error reply after which the same command may succeed later,
// nothing having been done: LOADING, BUSY, OOM, MISCONF, READONLY,
// MASTERDOWN, NOREPLICAS, CLUSTERDOWN, TRYAGAIN. Also when a fenced script
// reports one of them, raised by a command it called (Redis 7 passes the
// error on as it is; older servers wrap it in "ERR Error running script").
bool is_transient_error(std::string_view error) noexcept;

// True for OOM (maxmemory reached with noeviction), as it is or reported by
// a script: the one transient error that extending a key's TTL survives.
bool is_out_of_memory(std::string_view error) noexcept;

constexpr std::uint64_t retry_first_delay_ms = 100;
constexpr std::uint64_t retry_max_delay_ms = 1000;
constexpr Backoff retry_backoff{retry_first_delay_ms, retry_max_delay_ms};
// A response is tried for idempotency_lock_ttl, and never less than this:
// about what a lost connection was always given.
constexpr std::uint64_t store_retry_floor_ms = 20000;

// How long after its first failure a command is tried again. A response
// keeps its claim alive meanwhile (`keeps_claim`), so the bound is a choice:
// idempotency_lock_ttl, at least store_retry_floor_ms. A release or a
// renewal is of no use once the claim has expired by itself: lock_ttl.
std::uint64_t retry_window_ms(std::uint64_t lock_ttl_ms, bool keeps_claim) noexcept;

// The longest wait between two attempts that keep a claim alive: each one
// renews it, at least three times per lock, as a running request does.
std::uint64_t renewing_max_delay_ms(std::uint64_t lock_ttl_ms) noexcept;

// The attempts of one command after its first failure: waits of 100 ms
// doubling up to 1 s (and never longer than `max_delay`), until `window`
// after the first failure.
struct Retry {
    std::uint64_t started = 0;   // when the first failure came
    std::uint64_t deadline = 0;  // no attempt after this
    std::uint64_t delay = 0;     // the last wait
    unsigned failures = 0;

    // After a failure at `now`: true, with the wait before the next
    // attempt, or false when the window is over.
    bool next(std::uint64_t now, std::uint64_t window, std::uint64_t max_delay, std::uint64_t& wait) noexcept;
};

}  // namespace idem::redis
