// request_ctx.hpp — the module's context for one main request, in r->pool;
// each part is written by the files that own it alone. Its pool cleanup
// settles a claim whose response never completed.
// See docs/design.md#the-requests-life.
#pragma once

#include "capture.hpp"
#include "claim.hpp"
#include "client_gone.hpp"
#include "conf.hpp"
#include "feed.hpp"
#include "join.hpp"
#include "json_canonical.hpp"
#include "outcome.hpp"
#include "wait.hpp"
#include "store.hpp"

namespace idem {

struct PieceReplay;

// Each transition is one call to enter(); the states and their moves are
// docs/design.md#the-requests-life. The order matters: before granted the
// request awaits its answer; after decided the module has acted on it.
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

struct RequestHooks;

struct RequestCtx {
    ngx_http_request_t* request;
    LocConf* conf;
    RequestState state;    // enter() alone writes it
    Digest fingerprint;    // of the request (body_fingerprint.cpp), before the claim

    // For a replay, the stored response decoded once; its views are into the
    // store's reply taken over by r->pool, or a copy in r->pool.
    Outcome outcome;
    const Record* stored;
    MarkerWhy unreplayable_why;  // a 410's: what the marker found says (claim.cpp)
    BodyFault body_fault;        // an unreadable body's 400: why (body_fingerprint.cpp)

    // 0 until the forwarded header reached the upper filter point; capture.cpp
    // writes it there and again at the lower point.
    ngx_uint_t response_status;

    Claim claim;           // claim.hpp: the store key, the claim record, its lease
    Wait wait;             // wait.hpp: idempotency_wait
    Capture capture;       // capture.hpp: the response record being built
    ClientGuard client;    // client_gone.hpp: the handlers wrapped against client aborts
    Follower follower;     // feed.hpp: the original's feed followed
    Join join;             // join.hpp: the original's response sent as it streams
    PieceReplay* pieces;   // piece_replay.cpp: a response kept in pieces, replayed
    const RequestHooks* hooks;
};

// A floor cannot name one above it (docs/design.md#layers).
struct RequestHooks {
    void (*ended)(RequestCtx* ctx);  // run by the request pool's cleanup: what its end stops and settles
    const FeedTell* follow;          // how a duplicate following its original's feed is told (join.cpp)
};

// Registers the pool cleanup that runs hooks->ended; nullptr when out of memory.
RequestCtx* create_ctx(ngx_http_request_t* r, LocConf* conf, const RequestHooks* hooks) noexcept;

// Shares one read-only context, answered already (`missing`), counted once
// at its end. NGX_DECLINED, or an error status.
ngx_int_t pass_keyless(ngx_http_request_t* r) noexcept;

// Also after an internal redirect wiped nginx's module contexts; nullptr
// when the module does not act on it.
RequestCtx* find_ctx(ngx_http_request_t* r) noexcept;

inline void enter(RequestCtx* ctx, RequestState next) noexcept
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0, "idempotency: request state %s -> %s (\"%V\")",
                   state_name(ctx->state), state_name(next), &ctx->claim.key);
    ctx->state = next;
}

// The phases run again to act on it.
inline void set_outcome(RequestCtx* ctx, Outcome outcome) noexcept
{
    ctx->outcome = outcome;
    enter(ctx, outcome == Outcome::fresh ? RequestState::granted : RequestState::decided);
}

inline bool acted(const RequestCtx* ctx) noexcept
{
    return ctx->state > RequestState::decided;
}

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

inline bool capturing(const RequestCtx* ctx) noexcept
{
    return ctx->state == RequestState::forwarded || ctx->state == RequestState::client_gone;
}

inline bool client_left(const RequestCtx* ctx) noexcept
{
    return ctx->state == RequestState::client_gone || ctx->state == RequestState::drained;
}

// Recorded while the claim is held, swallowed once the client left.
inline bool following(const RequestCtx* ctx) noexcept
{
    return capturing(ctx) || ctx->state == RequestState::drained;
}

}  // namespace idem
