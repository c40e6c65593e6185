// claim.hpp — the claim's whole life (claim.cpp): named once the key is
// accepted, made and claimed once the request is fingerprinted, answered
// into ctx->outcome and the phases run again, waited for, renewed while its
// response is in progress, and settled. Declares the claim's part of the
// request context.
#pragma once

#include <cstdint>
#include <string_view>

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;

// The claim's part of the request context, written by claim.cpp alone.
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

// Names the claim: its store key, from the virtual server, the caller's
// scope and the request's key. False when out of memory or the scope
// cannot be evaluated.
bool claim_name(RequestCtx* ctx, std::string_view key) noexcept;

// The claim record: the fingerprint and a token unique to this request.
bool make_claim_record(RequestCtx* ctx) noexcept;
// Claims ctx->claim.key in the location's store (or reads what holds it);
// the answer sets ctx->outcome and runs the request's phases again.
void claim_key(RequestCtx* ctx) noexcept;
// The original's response began while the request waited for it: the
// request stops waiting and joins it (Outcome::joined).
void claim_joined(RequestCtx* ctx) noexcept;
// The request goes away: no more waiting for the store's answer.
void claim_stop_waiting(RequestCtx* ctx) noexcept;

// The request holds the claim and is forwarded: renew it until settled.
void claim_hold(RequestCtx* ctx) noexcept;
void claim_stop_renewing(RequestCtx* ctx) noexcept;

// Settling a held claim, fenced by its record: the response record (sealed
// with idempotency_encrypt_key), the marker of an executed response that
// cannot be replayed (410), or the key freed for a retry to run again.
// Owned `record` bytes the store keeps as they are, borrowed ones it copies.
// `notice` is told what became of the record (not_stored at once when it
// could not be sealed, and the marker went in its place).
void claim_complete(RequestCtx* ctx, RecordBytes record, StoreNotice notice = {}) noexcept;
// `why` goes to the log, naming the key; a marker that says why (`said`:
// the response breaks what can be sent again, replayable.hpp) tells the
// retries too, and is logged as an error.
void claim_unreplayable(RequestCtx* ctx, const char* why, MarkerWhy said = MarkerWhy::unsaid) noexcept;
void claim_release(RequestCtx* ctx, const char* why) noexcept;

}  // namespace idem
