// redis/retry.hpp — what the Redis store does when a command it owes Redis
// (storing a response, releasing a key, renewing a claim) fails for now:
// which error replies mean "not now" rather than "never", how long to wait
// before the next attempt (the module's one backoff, timing.hpp), for how
// long to keep trying, and how many bytes of responses Redis refused for
// memory a worker may hold meanwhile. Pure.
#pragma once

#include <cstddef>
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
    // A failure at `now` whose next attempt another schedule decides (a
    // store kept for memory, below).
    void count_failure(std::uint64_t now) noexcept;
};

// A response Redis refused for memory (OOM) is kept: its claim lives
// idempotency_ttl from that first refusal (extending a key needs no memory),
// and the store is tried again until it lands or that life ends. It waits
// with the others kept by the worker's store for that Redis, and one of
// them, the oldest first, is tried this often: Redis is asked no more while
// it is full, however many are kept.
constexpr std::uint64_t oom_probe_interval_ms = 1000;
// Each response Redis takes — the one tried, or any other — sends this many
// kept ones again at once: once Redis takes writes, every kept response goes
// within a few round trips of the first that lands (doubling), and a Redis
// that takes some writes and refuses others is sent at most this many kept
// stores per write it took.
constexpr std::size_t kept_stores_per_landing = 2;

// What is left, at `now`, of a kept claim's life that ends at `until`; 0
// once it is over.
constexpr std::uint64_t kept_life_left(std::uint64_t until, std::uint64_t now) noexcept
{
    return until > now ? until - now : 0;
}

// The bytes of the records a worker holds to store again while Redis
// refuses them for memory (idempotency_redis_oom_buffer): a record that
// does not fit in what is left is not held, and the unreplayable marker
// (a few dozen bytes) is kept instead.
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
