// request_ctx.hpp — what the module knows about one main request, from its
// key to its settled claim, and what it gets (outcome.hpp). Lives in
// r->pool; its pool cleanup (access.cpp) stops what the claim still waits
// for and settles a claim whose response never completed. A request that
// passes without a key shares one read-only context instead (access.cpp).
#pragma once

#include "conf.hpp"
#include "outcome.hpp"

namespace idem {

struct WaitGroup;

// Where a request is in its life. Each transition is one call to enter(),
// which logs the old and the new state at debug level, so that a debug log
// shows each request's path:
//
//   checking_key -> reading_body -> claiming -------> granted -> forwarded -> settled
//                                       |              ^    |         |
//                                       +--> waiting --+    |         v
//                                                           |    client_gone -> drained
//                                                           v
//                                                      uncaptured -> settled
//   checking_key, claiming, waiting -> decided -> answered
//   granted -> settled (the request ends before it is forwarded)
//
//   checking_key  created: the key is looked for and checked (access.cpp);
//                 -> reading_body, or -> decided (missing, invalid).
//   reading_body  the key is good: the body is read and fingerprinted;
//                 -> claiming, or the request ends with 500.
//   claiming      the claim is at the store, its answer awaited (claim.cpp);
//                 -> granted, -> waiting (the original is in flight), or
//                 -> decided (replay, 409, 410, 422, 503).
//   waiting       in a group waiting for the original (wait.cpp); the
//                 group's look answers it: -> granted, -> decided.
//   granted       the claim is ours; the phases run again to forward the
//                 request: -> forwarded (uncaptured when out of memory), or
//                 -> settled when the request ends before.
//   decided       outcome holds any other answer; the phases run again to
//                 give it: -> answered.
//   forwarded     the claim is held (and renewed), the request goes to its
//                 content handler, the response is captured as it goes out
//                 (capture.cpp): -> client_gone, -> settled.
//   client_gone   forwarded, and the client left (client_gone.cpp): the
//                 rest of the response is drained, captured and swallowed;
//                 -> drained.
//   uncaptured    forwarded with the claim held, but without memory to
//                 follow the response: -> settled when the request ends.
//   answered      the module answered (replay, problem) or let the request
//                 pass (idempotency_fail_open, 409 to error_page). Final.
//   settled       the claim was settled (stored, marked unreplayable, or
//                 released); the rest of the response passes untouched. Final.
//   drained       settled after the client left: the rest of the response is
//                 still swallowed. Final.
enum class RequestState : std::uint8_t {
    checking_key,
    reading_body,
    claiming,
    waiting,
    granted,
    decided,
    forwarded,
    client_gone,
    uncaptured,
    answered,
    settled,
    drained,
};

constexpr const char* state_name(RequestState s) noexcept
{
    constexpr const char* names[] = {"checking_key", "reading_body", "claiming",   "waiting",
                                     "granted",      "decided",      "forwarded",  "client_gone",
                                     "uncaptured",   "answered",     "settled",    "drained"};
    return names[static_cast<unsigned>(s)];
}

// Where a claimed request's body is recorded (capture.cpp): at the upper
// filter point when no filter in between changes it, else at the lower.
enum class CapturePoint : std::uint8_t { undecided, upper, lower };

// Everything the module knows about one main request.
struct RequestCtx {
    ngx_http_request_t* request;
    LocConf* conf;
    RequestState state;    // enter() alone writes it
    Outcome outcome;

    // pre-content phase
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
    ngx_msec_t lease_end;  // until when the claim surely holds (lease.hpp), from when it was sent
    Lease* lease;          // once the claim is ours: lease_end, revoked by a renewal that finds the claim gone
    ngx_event_t renew_timer;  // extends the claim while the response is in progress

    // replay: the stored response, decoded once; its views into the store's
    // reply, taken over by r->pool, or into a copy in r->pool
    const Record* stored;

    // capture (capture.cpp): the response record is built in place — its
    // head is written at the end, the body bytes go after it as they pass
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

// The request moves on to `next` (see RequestState).
inline void enter(RequestCtx* ctx, RequestState next) noexcept
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0, "idempotency: request state %s -> %s (\"%V\")",
                   state_name(ctx->state), state_name(next), &ctx->redis_key);
    ctx->state = next;
}

// The claim's answer (or access.cpp's own) is known: the phases run again
// to act on it (granted for the claim, decided for any other answer).
inline void set_outcome(RequestCtx* ctx, Outcome outcome) noexcept
{
    ctx->outcome = outcome;
    enter(ctx, outcome == Outcome::fresh ? RequestState::granted : RequestState::decided);
}

// Whether the phases ran again with the answer: the module has acted on it.
inline bool acted(const RequestCtx* ctx) noexcept
{
    return ctx->state > RequestState::decided;
}

// The request holds its claim and has not settled it.
inline bool holds_claim(const RequestCtx* ctx) noexcept
{
    switch (ctx->state) {
    case RequestState::granted:
    case RequestState::forwarded:
    case RequestState::client_gone:
    case RequestState::uncaptured:
        return true;
    default:
        return false;
    }
}

// The response is being recorded (capture.cpp).
inline bool capturing(const RequestCtx* ctx) noexcept
{
    return ctx->state == RequestState::forwarded || ctx->state == RequestState::client_gone;
}

// The client is gone: what is left of the response is swallowed.
inline bool client_left(const RequestCtx* ctx) noexcept
{
    return ctx->state == RequestState::client_gone || ctx->state == RequestState::drained;
}

}  // namespace idem
