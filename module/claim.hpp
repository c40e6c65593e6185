// claim.hpp — the claim's life (claim.cpp, claim_settle.cpp) and its part of
// the request context. See docs/design.md#how-it-works.
#pragma once

#include <cstdint>
#include <string_view>

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;

// Written by claim.cpp alone.
struct Claim {
    ngx_str_t key;          // the store key (claim_name)
    ngx_str_t record;       // the claim record: the fingerprint and the request's token
    Store* store;           // the location's store
    PendingOp* pending;     // the claim in flight, nullptr when none
    ngx_event_t timer;      // idempotency_redis_timeout for the claim in flight
    ngx_msec_t lease_end;   // until when the claim surely holds (lease.hpp), from when it was sent
    Lease* lease;           // once the claim is ours: lease_end, revoked by a renewal that finds the claim gone
    ngx_event_t renew_timer;  // extends the claim while the response is in progress
    std::uint64_t fence;    // drawn by the store when the claim was granted (fence.hpp); 0: none
    ngx_atomic_uint_t settles_seen;  // the key's settles on the live board when the claim was sent (wait.cpp)
};

// False when out of memory or the scope cannot be evaluated.
bool claim_name(RequestCtx* ctx, std::string_view key) noexcept;

bool make_claim_record(RequestCtx* ctx) noexcept;
// Or reads what holds it; the answer runs the request's phases again.
void claim_key(RequestCtx* ctx) noexcept;
void claim_joined(RequestCtx* ctx) noexcept;
void claim_stop_waiting(RequestCtx* ctx) noexcept;

// Renews it until settled.
void claim_hold(RequestCtx* ctx) noexcept;
void claim_stop_renewing(RequestCtx* ctx) noexcept;

// Fenced by the claim record. Owned `record` bytes are kept, borrowed ones
// copied. `notice` gets not_stored at once when the record could not be
// sealed and the marker went in its place.
void claim_complete(RequestCtx* ctx, RecordBytes record, StoreNotice notice = {}) noexcept;
// `why` goes to the log with the key; a marker that says why (`said`)
// tells the retries too, and is logged as an error.
void claim_unreplayable(RequestCtx* ctx, const char* why, MarkerWhy said = MarkerWhy::unsaid) noexcept;
void claim_release(RequestCtx* ctx, const char* why) noexcept;

}  // namespace idem
