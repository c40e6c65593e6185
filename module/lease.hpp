// lease.hpp — until when a request surely still holds its claim, so that its
// response can be stored with a plain `SET ... XX` instead of the fenced
// script. Pure. The argument, what it assumes and what is checked instead
// (the lease judged when written to the socket; revoked by a renewal that
// finds the claim gone; what a leased store put back) is
// docs/design.md#the-lease.
#pragma once

#include <cstdint>

namespace idem {

constexpr std::uint64_t lease_margin(std::uint64_t lock_ttl, std::uint64_t redis_timeout) noexcept
{
    return redis_timeout + lock_ttl / 10;
}

// Exclusive; `sent` itself when the margin eats the whole lock_ttl.
constexpr std::uint64_t lease_end(std::uint64_t sent, std::uint64_t lock_ttl, std::uint64_t redis_timeout) noexcept
{
    std::uint64_t margin = lease_margin(lock_ttl, redis_timeout);
    return lock_ttl > margin ? sent + (lock_ttl - margin) : sent;
}

// Revoked for good once a renewal found the claim gone. Reference-counted
// (store.hpp): the request and each call that may judge or revoke it hold one.
struct Lease {
    std::uint64_t end;  // lease_end() of the claim
    unsigned refs;
    bool revoked;

    bool holds(std::uint64_t now) const noexcept { return !revoked && now < end; }
    void revoke() noexcept { revoked = true; }
};

}  // namespace idem
