// claim.hpp — the claim's whole life (claim.cpp): claimed once the request
// is fingerprinted, answered into ctx->outcome and the phases run again,
// waited for, renewed while its response is in progress, and settled.
#pragma once

#include <string_view>

#include "request_ctx.hpp"
#include "store.hpp"

namespace idem {

// The claim record: the fingerprint and a token unique to this request.
bool make_claim_record(RequestCtx* ctx) noexcept;
// Claims ctx->redis_key in the location's store (or reads what holds it);
// the answer sets ctx->outcome and runs the request's phases again.
void claim_key(RequestCtx* ctx) noexcept;
// What the store answered (to the request's own claim, or to a look its
// wait group made): sets ctx->outcome and runs the request's phases again,
// unless the request waits on for an original in flight.
void claim_answered(RequestCtx* ctx, const ClaimResult& result) noexcept;
// The request goes away: no more waiting for the store's answer.
void claim_stop_waiting(RequestCtx* ctx) noexcept;

// The request holds the claim and is forwarded: renew it until settled.
void claim_hold(RequestCtx* ctx) noexcept;
void claim_stop_renewing(RequestCtx* ctx) noexcept;

// Settling a held claim, fenced by its record: the response record (sealed
// with idempotency_encrypt_key), the marker of an executed response that
// cannot be replayed (410), or the key freed for a retry to run again.
// Owned `record` bytes the store keeps as they are, borrowed ones it copies.
void claim_complete(RequestCtx* ctx, RecordBytes record) noexcept;
void claim_unreplayable(RequestCtx* ctx, const char* why) noexcept;
void claim_release(RequestCtx* ctx, const char* why) noexcept;

}  // namespace idem
