// wait.hpp — idempotency_wait: duplicates that found their original in
// flight wait for it together. In each worker the requests waiting for the
// same key (same location, same fingerprint) form one group, and the group
// looks again — one claim attempt, on behalf of all of them — after a
// growing delay: 200 waiters cost Redis their own first claim each and the
// group's few looks, not a look each. What a look finds is every member's
// answer (the replay, 410, 503); a look that is granted the claim (the
// original was released) makes one member the new original, and the others
// wait on for it. A member whose wait runs out gets a last look (shared with
// whoever else is due) and then 409. An original that settles in the same
// worker wakes its group at once; one that settles in another worker of the
// same nginx, through the live board (live_board.hpp): the store bumps the
// key's slot once it holds the settle, and every worker's groups look at
// the board every millisecond. Waiters on another gateway have only their
// looks.
// Each member is answered through the function its request gave when it
// began to wait (claim.cpp's): wait.* calls nothing of claim.cpp. Owns the
// wait's part of the request context (Wait) and the groups.
// Must not touch: the answers themselves, the claim's fields.
#pragma once

#include <string_view>

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;
struct WaitGroup;

// A look granted the claim (the original was released): the claim record
// it was made with and the lease from when it was sent, for the member
// that becomes the new original.
struct LookGrant {
    std::string_view record;
    ngx_msec_t lease_end;
};

// How the group answers a member: what its look found (claim.cpp gives it).
using WaitAnswer = void (*)(RequestCtx* ctx, const ClaimResult& result, const LookGrant* grant);

// The wait's part of the request context, written by wait.cpp alone.
struct Wait {
    WaitGroup* group;      // the requests waiting for the same original, nullptr when not waiting
    ngx_queue_t link;      // in the group's members
    ngx_event_t timer;     // when the wait runs out
    ngx_msec_t deadline;   // idempotency_wait after the first conflict
    WaitAnswer answer;     // how the group answers this request
    bool waited;           // the request has waited (deadline is set)
    bool due;              // the wait ran out: answered by the group's next look
};

// ctx's claim found the original in flight: wait for it (true), or not —
// idempotency_wait is off or over (false: the request gets 409). The
// group's look answers it through `answered`, after it left the group.
bool wait_for_original(RequestCtx* ctx, WaitAnswer answered) noexcept;

// The original settled its claim in this worker (stored or released): its
// waiters here look now rather than after their delay. The look goes to
// the same connection as the settling command, after it.
void wake_waiters(RequestCtx* original) noexcept;

// The request goes away while it waits: it leaves its group.
void stop_waiting(RequestCtx* ctx) noexcept;

}  // namespace idem
