// request_ctx.hpp — what the module knows about one main request, from its
// key to its settled claim, and what it gets (outcome.hpp). Lives in
// r->pool; its pool cleanup (access.cpp) stops what the claim still waits
// for and settles a claim whose response never completed. A request that
// passes without a key shares one read-only context instead (access.cpp).
#pragma once

#include "conf.hpp"
#include "outcome.hpp"
#include "store.hpp"

namespace idem {

struct WaitGroup;

// Where a claimed request's body is recorded (capture.cpp): at the upper
// filter point when no filter in between changes it, else at the lower.
enum class CapturePoint : std::uint8_t { undecided, upper, lower };

// Everything the module knows about one main request.
struct RequestCtx {
    ngx_http_request_t* request;
    LocConf* conf;
    Outcome outcome;

    // pre-content phase
    bool decided;          // outcome holds the claim's answer
    ngx_event_t timer;     // Redis timeout for the pending claim
    ngx_event_t wait_timer;  // idempotency_wait: when the wait runs out
    ngx_msec_t wait_deadline;
    bool waited;
    bool wait_due;         // the wait ran out: answered by the group's next look
    WaitGroup* wait_group; // the requests waiting for the same original (wait.cpp)
    ngx_queue_t wait_link;
    PendingOp* pending;    // the claim in flight, nullptr when none
    Store* store;

    // identity of the claim
    Digest fingerprint;
    ngx_str_t redis_key;
    ngx_str_t claim;       // the claim record: fingerprint and random token
    bool owns_claim;       // we hold the claim and have not settled it
    ngx_msec_t lease_end;  // until when the claim surely holds (lease.hpp), from when it was sent
    Lease* lease;          // once the claim is ours: lease_end, revoked by a renewal that finds the claim gone
    ngx_event_t renew_timer;  // extends the claim while the response is in progress

    // replay: the stored response, decoded once; its views into the store's
    // reply, taken over by r->pool, or into a copy in r->pool
    const Record* stored;
    bool responded;        // the module answered this request itself

    // capture (capture.cpp): the response record is built in place — its
    // head is written at the end, the body bytes go after it as they pass
    bool capturing;        // recording the response as it streams out
    bool detached;         // the client is gone; the response is drained for storing
    bool oversize;         // over idempotency_max_response_size: stored as unreplayable
    ngx_uint_t response_status;
    ngx_uint_t upper_headers;  // response headers in the list at the upper filter point
    std::uint8_t upper_body_flags;  // what the filters had asked of the body there
    CapturePoint capture_point;
    ngx_array_t headers;   // of Header
    char* record;
    size_t head_size;
    size_t body_size;
    size_t capacity;
    ngx_http_handler_pt content_handler;  // the location's, wrapped by ours
    ngx_http_event_handler_pt write_handler;  // the upstream's, behind the client-timeout guard
};

// The request's context, also after an internal redirect wiped nginx's
// module contexts; nullptr when the module does not act on it.
RequestCtx* find_ctx(ngx_http_request_t* r) noexcept;

inline void set_outcome(RequestCtx* ctx, Outcome outcome) noexcept
{
    ctx->outcome = outcome;
    ctx->decided = true;
}

}  // namespace idem
