// store.hpp — where claims and responses live. The access and capture code
// speak only to this interface; redis/redis_store.* implements it over
// Redis. Every operation touches exactly one key and never blocks.
#pragma once

#include <cstdint>
#include <string_view>

#include "ngx.hpp"
#include "outcome.hpp"
#include "seal.hpp"

namespace idem {

// An operation in flight, owned by the store.
struct PendingOp;

struct ClaimResult {
    Decision decision;
    std::string_view stored;  // the record found under the key; valid during the callback only
};

using ClaimCallback = void (*)(void* data, const ClaimResult& result);

// Who waits for a claim, and how to judge the record it finds; every store
// keeps one with each claim in flight.
struct ClaimWaiter {
    ClaimCallback callback;  // nullptr once abandoned
    void* data;
    Digest fingerprint;
    const SecretKey* keys;   // idempotency_encrypt_key, to open sealed records
    std::size_t key_count;

    // What `stored`, the record found under `key`, means for the request
    // (outcome.hpp's decide_at_rest; a refusal is logged). A sealed record
    // is opened into `opened` (ngx_alloc'd, freed by the caller) and
    // `stored` then points there.
    Decision judge(std::string_view key, std::string_view& stored, char*& opened, ngx_log_t* log) const noexcept;
};

class Store {
public:
    virtual ~Store() = default;

    // Claims `key` with the claim record `claim` for lock_ttl_ms, or reads
    // what is already there, in one round trip. Returns nullptr when the
    // store cannot be reached now (the caller answers at once); otherwise
    // `callback` runs exactly once, unless the operation is abandoned.
    // With `keys` (encryption at rest) a stored record must open with one of
    // them, bound to `key`; what does not is `unverifiable`.
    virtual PendingOp* claim(std::string_view key, std::string_view claim,
                             const Digest& fingerprint, std::uint64_t lock_ttl_ms,
                             const SecretKey* keys, std::size_t key_count,
                             ClaimCallback callback, void* data) noexcept = 0;

    // The caller stops waiting (timeout, request gone): the callback is not
    // run, and a claim that turns out to have been granted is released.
    virtual void abandon(PendingOp* op) noexcept = 0;

    // Fenced by the claim record: only its holder stores or releases.
    // Fire and forget: the outcome is logged, the request is not needed.
    // What meets a transient failure (Redis: a lost connection, an error
    // such as OOM, BUSY, LOADING or READONLY) the store tries again by
    // itself, its request being gone by then: a response for the claim's
    // lock_ttl_ms (at least 20 s) with the claim kept alive meanwhile, a
    // release until the claim would have expired anyway. lock_ttl_ms 0:
    // the longest lock_ttl this store has claimed or renewed with.
    virtual void complete(std::string_view key, std::string_view claim, std::string_view record,
                          std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms = 0) noexcept = 0;
    virtual void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms = 0) noexcept = 0;
    // Extends a claim still held by `claim` to lock_ttl_ms from now.
    virtual void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept = 0;
};

}  // namespace idem
