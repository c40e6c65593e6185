// wait.hpp — idempotency_wait: in each worker, duplicates waiting for the same
// original form one group that looks again on its members' behalf after a
// growing delay (200 waiters cost Redis their first claims and a few looks,
// not a look each). A settle in this worker wakes the group at once, in
// another worker through the live board; other gateways have only looks.
// Members are answered through the WaitAnswer they gave, so wait.* calls
// nothing of claim.cpp. Owns Wait and the groups; must not touch the answers
// nor the claim's fields. See docs/design.md#in-flight.
#pragma once

#include <string_view>

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;
struct WaitGroup;

// For the member that becomes the new original.
struct LookGrant {
    std::string_view record;
    ngx_msec_t lease_end;
};

using WaitAnswer = void (*)(RequestCtx* ctx, const ClaimResult& result, const LookGrant* grant);

// Written by wait.cpp alone.
struct Wait {
    WaitGroup* group;      // the requests waiting for the same original, nullptr when not waiting
    ngx_queue_t link;      // in the group's members
    ngx_event_t timer;     // when the wait runs out
    ngx_msec_t deadline;   // idempotency_wait after the first conflict
    WaitAnswer answer;     // how the group answers this request
    bool waited;           // the request has waited (deadline is set)
    bool due;              // the wait ran out: answered by the group's next look
};

// False when idempotency_wait is off or over (the request gets 409). The
// look answers through `answered`, after the request left the group.
bool wait_for_original(RequestCtx* ctx, WaitAnswer answered) noexcept;

// Its waiters here look now; the look goes to the same connection as the
// settling command, after it.
void wake_waiters(RequestCtx* original) noexcept;

void stop_waiting(RequestCtx* ctx) noexcept;

}  // namespace idem
