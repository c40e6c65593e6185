// request_ctx.hpp — what the module knows about one main request, from its
// key to its settled claim: where it is in its life (RequestState, moved on
// by enter() alone), what it gets (outcome.hpp), and the parts the claim,
// the wait, the capture and the client guard own (their headers). Lives in
// r->pool; its pool cleanup (access.cpp) stops what the claim still waits
// for and settles a claim whose response never completed. A request that
// passes without a key shares one read-only context instead (access.cpp).
#pragma once

#include "capture.hpp"
#include "claim.hpp"
#include "client_gone.hpp"
#include "conf.hpp"
#include "join.hpp"
#include "json_canonical.hpp"
#include "outcome.hpp"
#include "wait.hpp"
#include "store.hpp"

namespace idem {

struct PieceReplay;

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
//   checking_key, reading_body, claiming, waiting -> decided -> answered
//   claiming, waiting -> decided -> joining -> answered
//   granted -> settled (the request ends before it is forwarded)
//
//   checking_key  created: the key is looked for and checked (access.cpp);
//                 -> reading_body, or -> decided (missing, invalid).
//   reading_body  the key is good: the body is read and fingerprinted;
//                 -> claiming, -> decided (the store cannot be reached, or
//                 the body is not what idempotency_fingerprint reads),
//                 or the request ends with 500.
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
//   joining       decided to join the original's response as it streams
//                 (Outcome::joined, join.cpp): sent each byte as it comes;
//                 -> answered when it ends.
//   answered      the module answered (replay, problem) or let the request
//                 pass (idempotency_fail_open, 409 to error_page). Final.
//   settled       the claim was settled (stored, marked unreplayable, or
//                 released); the rest of the response passes untouched. Final.
//   drained       settled after the client left: the rest of the response is
//                 still swallowed. Final.
// The order matters: before granted the request awaits its answer (the
// pre-content phase waits); after decided the module has acted on it.
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
    joining,
    answered,
    settled,
    drained,
};

constexpr const char* state_name(RequestState s) noexcept
{
    constexpr const char* names[] = {"checking_key", "reading_body", "claiming",   "waiting",
                                     "granted",      "decided",      "forwarded",  "client_gone",
                                     "uncaptured",   "joining",      "answered",   "settled",
                                     "drained"};
    return names[static_cast<unsigned>(s)];
}

// Everything the module knows about one main request. Each part is written
// by the files that own it alone (others only read it): the request's
// identity and its answer here, the claim's, the wait's, the capture's and
// the client guard's parts in the structures their own headers declare, as
// nginx keeps ngx_http_request_body_t apart from ngx_http_request_t.
struct RequestCtx {
    ngx_http_request_t* request;
    LocConf* conf;
    RequestState state;    // enter() alone writes it
    Digest fingerprint;    // of the request (body_fingerprint.cpp), before the claim

    // What the request gets: the claim's answer (claim.cpp), or the key's
    // own (access.cpp): the outcome and, for a replay, the stored response,
    // decoded once; its views into the store's reply, taken over by
    // r->pool, or into a copy in r->pool.
    Outcome outcome;
    const Record* stored;
    MarkerWhy unreplayable_why;  // a 410's: what the marker found says (claim.cpp)
    BodyFault body_fault;        // an unreadable body's 400: why (body_fingerprint.cpp)

    // The forwarded response's status, 0 until its header reached the upper
    // filter point; capture.cpp writes it there and again as the client
    // gets it (the lower point); claim.cpp's markers and client_gone.cpp
    // read it.
    ngx_uint_t response_status;

    Claim claim;           // claim.hpp: the store key, the claim record, its lease
    Wait wait;             // wait.hpp: idempotency_wait
    Capture capture;       // capture.hpp: the response record being built
    ClientGuard client;    // client_gone.hpp: the handlers wrapped against client aborts
    Join join;             // join.hpp: the original's response followed live
    PieceReplay* pieces;   // piece_replay.cpp: a response kept in pieces, replayed
    // Run by the request pool's cleanup: the handler that made the context
    // says what its end stops and settles (a floor below it cannot name it).
    void (*ended)(RequestCtx* ctx);
};

// A protected request's context, in r->pool, with the pool cleanup that runs
// `ended`; nullptr when out of memory.
RequestCtx* create_ctx(ngx_http_request_t* r, LocConf* conf, void (*ended)(RequestCtx*)) noexcept;

// A request without a key shares one read-only context, answered already
// (`missing`), counted once at its end. NGX_DECLINED, or an error status.
ngx_int_t pass_keyless(ngx_http_request_t* r) noexcept;

// The request's context, also after an internal redirect wiped nginx's
// module contexts; nullptr when the module does not act on it.
RequestCtx* find_ctx(ngx_http_request_t* r) noexcept;

// The request moves on to `next` (see RequestState).
inline void enter(RequestCtx* ctx, RequestState next) noexcept
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0, "idempotency: request state %s -> %s (\"%V\")",
                   state_name(ctx->state), state_name(next), &ctx->claim.key);
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

// The response passes through the capture's body filter: recorded while
// the claim is held, swallowed once the client left.
inline bool following(const RequestCtx* ctx) noexcept
{
    return capturing(ctx) || ctx->state == RequestState::drained;
}

}  // namespace idem
