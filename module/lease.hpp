// lease.hpp — until when a request surely still holds its claim, so that
// its response can be stored with a plain `SET ... XX` instead of the
// fenced script. Pure.
//
// The argument. The claim was written by `SET key claim NX PX lock_ttl`,
// which the gateway sent at `sent` (its monotonic clock); Redis ran it
// later, and so expires the key no earlier than `sent + lock_ttl` — by
// Redis's clock. Until then nobody else can claim the key: SET NX fails on
// a key that exists. A store sent before `lease_end` therefore finds our
// claim, provided that
//   - Redis's clock does not run ahead of the gateway's by more than the
//     margin over one lock_ttl (a tenth of it: far beyond NTP's slew, not
//     a clock stepped forward by seconds);
//   - the store reaches Redis and runs within idempotency_redis_timeout of
//     being sent (the other part of the margin): a gateway paused between
//     sending and Redis running it for longer is not covered;
//   - Redis keeps its data (no failover to a replica that missed the claim,
//     no eviction, no FLUSHALL) — which the guarantee assumes anyway.
// Two more conditions are checked rather than assumed:
//   - the lease is judged when the store is written to the socket, not
//     when it is queued: a store that waited (in the pipeline, for a
//     reconnect, for a Sentinel's new master) past `lease_end` goes as the
//     fenced script;
//   - a renewal that finds the claim gone (it answers 0) revokes the lease:
//     Redis lost the claim, so nothing said above holds any more, and every
//     later store of the request goes fenced.
// The leased store is `MULTI; PEXPIRETIME key; SET key record PX ttl XX
// GET; EXEC`: it learns, atomically with the overwrite, what the key held
// and until when. When any of the above did not hold and it replaced
// another request's stored response (or marker), it puts that value back
// (fenced) with the very expiry it had (PXAT), so the put-back never
// shortens — nor lengthens — the life of what it restores; a stored record
// of our own fingerprint is equal in meaning to ours and stays overwritten.
// Another request's claim is not put back: ours stays. That request's
// store then finds the key taken and stores nothing, and its retries are
// answered from ours (or 422); a claim put back could outlive that store,
// and its expiry would let a retry execute a third time for one loss
// (docs/design.md#the-lease). Past the lease the fenced script decides, as
// it always did.
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
