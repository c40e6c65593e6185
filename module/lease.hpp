// lease.hpp — until when a request surely still holds its claim, so that
// its response can be stored with a plain `SET ... XX` instead of the
// fenced script. Pure.
//
// The argument. The claim was written by `SET key claim NX PX lock_ttl`,
// sent at `sent` (the gateway's monotonic clock) and run by Redis later, so
// the key expires no earlier than `sent + lock_ttl` by Redis's clock, and
// until then anyone else's SET NX fails. A store sent before `lease_end`
// therefore finds our claim, provided that
//   - Redis's clock runs ahead of the gateway's by no more than the margin
//     over one lock_ttl (a tenth of it: far beyond NTP's slew, not a clock
//     stepped forward by seconds);
//   - the store reaches Redis and runs within idempotency_redis_timeout of
//     being sent (the rest of the margin): a gateway paused longer between
//     sending and Redis running it is not covered;
//   - Redis keeps its data (no failover to a replica that missed the claim,
//     no eviction, no FLUSHALL), which the guarantee assumes anyway.
// Two more are checked, not assumed:
//   - the lease is judged when the store is written to the socket, not
//     when queued: a store that waited (in the pipeline, for a reconnect,
//     for a Sentinel's new master) past `lease_end` goes fenced;
//   - a renewal that finds the claim gone (it answers 0) revokes the lease:
//     Redis lost the claim, and every later store of the request goes fenced.
// The leased store, `MULTI; PEXPIRETIME key; SET key record PX ttl XX GET;
// EXEC`, learns atomically with the overwrite what the key held and until
// when. When the above did not hold and it replaced another request's
// stored response (or marker), it puts that back (fenced) with its very
// expiry (PXAT), neither shortened nor lengthened; a stored record of our
// own fingerprint means the same as ours and stays overwritten. Another
// request's claim is not put back: that request's store finds the key
// taken and stores nothing, its retries answered from ours (or 422); a
// claim put back could outlive that store, and its expiry let a retry
// execute a third time for one loss (docs/design.md#the-lease). Past the
// lease the fenced script decides.
#pragma once

#include <cstdint>

namespace idem {

constexpr std::uint64_t lease_margin(std::uint64_t lock_ttl, std::uint64_t redis_timeout) noexcept
{
    return redis_timeout + lock_ttl / 10;
}

// The last moment (exclusive) a store may be sent within the lease of a
// claim sent at `sent`; `sent` itself when the margin eats the whole lock_ttl.
constexpr std::uint64_t lease_end(std::uint64_t sent, std::uint64_t lock_ttl, std::uint64_t redis_timeout) noexcept
{
    std::uint64_t margin = lease_margin(lock_ttl, redis_timeout);
    return lock_ttl > margin ? sent + (lock_ttl - margin) : sent;
}

// What a request, its renewals and its store share: until when its claim
// surely holds. Revoked for good once a renewal found the claim gone.
// Reference-counted (store.hpp: new_lease, hold_lease, drop_lease): the
// request and each call that may still judge or revoke it hold one.
struct Lease {
    std::uint64_t end;  // lease_end() of the claim
    unsigned refs;
    bool revoked;

    bool holds(std::uint64_t now) const noexcept { return !revoked && now < end; }
    void revoke() noexcept { revoked = true; }
};

}  // namespace idem
