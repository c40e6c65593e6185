// zone/zone_lock.hpp — the zone store's mutex (the slab pool's), taken per
// section of work; in production ngx_shmtx_lock/unlock. Built with
// -DIDEM_ZONE_LOCK_STATS (scripts/bench-zone-lock.sh; never shipped) it
// counts per section takes, contention, spins, give-ups to the semaphore,
// and ns waited and held, printed to the error log at exit. Under callgrind
// with --collect-atstart=no only instructions under the mutex are counted.
#pragma once

#include "../ngx.hpp"

namespace idem::zone {

// What the mutex was held for; a claim is told apart once it knows whether
// it found a record (a replay, or a request waiting on a claim) or inserted one.
enum class Section { claim, found, store, release, renew, live, admin };

#ifndef IDEM_ZONE_LOCK_STATS

inline void lock(ngx_shmtx_t& mutex, Section) noexcept
{
    ngx_shmtx_lock(&mutex);
}

inline void unlock(ngx_shmtx_t& mutex, Section) noexcept
{
    ngx_shmtx_unlock(&mutex);
}

#else

}  // namespace idem::zone

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include <valgrind/callgrind.h>

namespace idem::zone {

struct LockStats {
    struct Counts {
        std::uint64_t taken, found_taken, spins, slept, wait_ns, held_ns, held_max_ns;
    };
    Counts by_section[7]{};
    Counts current{};  // the acquisition in progress, added to its section at unlock
    std::uint64_t held_since = 0;

    static std::uint64_t now_ns() noexcept
    {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
    }

    ~LockStats()
    {
        static const char* const names[] = {"claim", "found", "store", "release", "renew", "live", "admin"};
        for (unsigned s = 0; s < 6; s++) {
            const Counts& c = by_section[s];
            if (c.taken == 0) {
                continue;
            }
            std::fprintf(stderr,
                         "zone-lock pid=%d section=%s taken=%" PRIu64 " found_taken=%" PRIu64 " spins=%" PRIu64
                         " slept=%" PRIu64 " wait_ns=%" PRIu64 " held_ns=%" PRIu64 " held_max_ns=%" PRIu64 "\n",
                         int(ngx_pid), names[s], c.taken, c.found_taken, c.spins, c.slept, c.wait_ns, c.held_ns,
                         c.held_max_ns);
        }
    }
};

inline LockStats lock_stats;

inline void lock(ngx_shmtx_t& mutex, Section) noexcept
{
    LockStats::Counts& c = lock_stats.current;
    c = {};
    if (!ngx_shmtx_trylock(&mutex)) {
        // The first phase of ngx_shmtx_lock's spin, counted; then its own.
        std::uint64_t start = LockStats::now_ns();
        bool got = false;
        c.found_taken++;
        for (ngx_uint_t n = 1; !got && n < 2048; n <<= 1) {
            for (ngx_uint_t i = 0; i < n; i++) {
                ngx_cpu_pause();
            }
            c.spins += n;
            got = ngx_shmtx_trylock(&mutex);
        }
        if (!got) {
            c.slept++;
            ngx_shmtx_lock(&mutex);
        }
        c.wait_ns += LockStats::now_ns() - start;
    }
    c.taken++;
    lock_stats.held_since = LockStats::now_ns();
    CALLGRIND_TOGGLE_COLLECT;
}

inline void unlock(ngx_shmtx_t& mutex, Section section) noexcept
{
    CALLGRIND_TOGGLE_COLLECT;
    std::uint64_t held = LockStats::now_ns() - lock_stats.held_since;
    ngx_shmtx_unlock(&mutex);
    const LockStats::Counts& a = lock_stats.current;
    LockStats::Counts& c = lock_stats.by_section[unsigned(section)];
    c.taken += a.taken;
    c.found_taken += a.found_taken;
    c.spins += a.spins;
    c.slept += a.slept;
    c.wait_ns += a.wait_ns;
    c.held_ns += held;
    if (held > c.held_max_ns) {
        c.held_max_ns = held;
    }
}

#endif

}  // namespace idem::zone
