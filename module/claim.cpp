// claim.cpp — the claim's life but its settling (claim_settle.cpp), and
// claim.hpp's Claim: named, made, answered, handed to a wait group, renewed,
// abandoned. Moves the request to claiming, waiting, granted or decided.
// Must not touch the response (capture.cpp) nor the answers.
// See docs/design.md#how-it-works.

#include "claim.hpp"

#include <openssl/rand.h>

#include <cstring>
#include <utility>

#include "claim_token.hpp"
#include "feed.hpp"
#include "key_space.hpp"
#include "lease.hpp"
#include "live_board.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "request_ctx.hpp"
#include "store_factory.hpp"
#include "wait.hpp"

namespace idem {
namespace {

constexpr size_t token_length = token_unique_length;

LogLimiter unreachable_log, timeout_log;

// The request's live log and pieces go to the same store through their own
// parts of it.
ClaimStore* claims(const RequestCtx* ctx) noexcept
{
    return ctx->claim.store;
}

void resume(ngx_http_request_t* r)
{
    ngx_connection_t* c = r->connection;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

void free_block(void* block)
{
    ngx_free(block);
}

// The store's own block is taken over when it lets go of it, freed with
// r->pool; else (a block another waiter took) copied into r->pool.
bool keep_stored(RequestCtx* ctx, const ClaimResult& result)
{
    ngx_pool_t* pool = ctx->request->pool;
    if (result.record == nullptr) {
        return false;
    }
    if (result.bytes != nullptr && result.bytes->owns()) {
        auto* stored = static_cast<Record*>(ngx_palloc(pool, sizeof(Record)));
        ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(pool, 0);
        if (stored == nullptr || cln == nullptr) {
            return false;
        }
        cln->handler = free_block;
        cln->data = result.bytes->release();
        *stored = *result.record;
        ctx->stored = stored;
        return true;
    }
    auto* stored = static_cast<Record*>(ngx_palloc(pool, sizeof(Record) + result.stored.size()));
    if (stored == nullptr) {
        return false;
    }
    char* copy = reinterpret_cast<char*>(stored + 1);
    std::memcpy(copy, result.stored.data(), result.stored.size());
    *stored = rebased(*result.record, result.stored, copy);
    ctx->stored = stored;
    return true;
}

void drop_request_lease(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    drop_lease(ctx->claim.lease);
    ctx->claim.lease = nullptr;  // a claim settled from a later cleanup is stored fenced
}

void take_lease(RequestCtx* ctx)
{
    ngx_http_request_t* r = ctx->request;
    if (ctx->claim.lease != nullptr) {
        return;
    }
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == nullptr) {
        return;  // no lease: the stores go fenced
    }
    ctx->claim.lease = new_lease(ctx->claim.lease_end, r->connection->log);
    cln->handler = drop_request_lease;
    cln->data = ctx;
}

void answered(RequestCtx* ctx, const ClaimResult& result, const LookGrant* grant) noexcept;

void on_claim(void* data, const ClaimResult& result)
{
    answered(static_cast<RequestCtx*>(data), result, nullptr);
}

void on_claim_timeout(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    count(Counter::redis_timeouts);
    if (timeout_log.admit()) {
        ngx_log_error(NGX_LOG_ERR, ev->log, 0,
                      "idempotency: Redis did not answer claims within %M ms (%ui since the last line)",
                      ctx->conf->redis_timeout, timeout_log.take());
    }
    if (ctx->claim.pending != nullptr) {
        claims(ctx)->abandon(ctx->claim.pending);
        ctx->claim.pending = nullptr;
    }
    set_outcome(ctx, Outcome::unavailable);
    resume(ctx->request);
}


// Three renewals per lock_ttl: an upstream slower than the lock never lets a
// duplicate run, and a claim whose gateway died still expires within one.
void on_renew(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    if (!holds_claim(ctx)) {
        return;
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ev->log, 0, "idempotency: renewing the claim of \"%V\"", &ctx->claim.key);
    claims(ctx)->renew(view(ctx->claim.key), view(ctx->claim.record), ctx->conf->lock_ttl, ctx->claim.lease);
    if (ctx->capture.feed != nullptr) {
        feed_renew(ctx->capture.feed);  // the live log lives as long as the claim
    }
    ngx_add_timer(ev, ngx_max(ctx->conf->lock_ttl / 3, 1));
}

// Unique (fencing), not secret: 8 random bytes once per worker, then a
// counter (16 random bytes per request cost more than the rest of the claim).
struct TokenSource {
    u_char bytes[token_length];
    std::uint64_t counter = 0;
    bool seeded = false;

    bool next(u_char* out)
    {
        if (!seeded) {
            if (RAND_bytes(bytes, 8) != 1) {
                return false;
            }
            seeded = true;
        }
        counter++;
        for (size_t i = 0; i < 8; i++) {
            bytes[8 + i] = static_cast<u_char>(counter >> (8 * i));
        }
        std::memcpy(out, bytes, token_length);
        return true;
    }
};

TokenSource tokens;


// Also answers a look its wait group made (wait.cpp). A look that granted
// the claim hands over its claim record and the lease from when it was sent.
void answered(RequestCtx* ctx, const ClaimResult& result, const LookGrant* grant) noexcept
{
    ngx_http_request_t* r = ctx->request;
    ctx->claim.pending = nullptr;
    if (ctx->claim.timer.timer_set) {
        ngx_del_timer(&ctx->claim.timer);
    }

#if (NGX_DEBUG)
    std::string_view name = outcome_info(result.outcome).name;
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: claim of \"%V\" answered: %*s%s",
                   &ctx->claim.key, name.size(), name.data(), ctx->wait.waited ? ", after waiting" : "");
#endif
    Outcome outcome = result.outcome;
    if (outcome != Outcome::conflict) {
        feed_leave(ctx);  // no longer watching an original's response
    }
    switch (outcome) {
    case Outcome::fresh:
        if (grant != nullptr) {  // all claim records have the same size
            std::memcpy(ctx->claim.record.data, grant->record.data(), grant->record.size());
            ctx->claim.lease_end = grant->lease_end;
        }
        ctx->claim.fence = result.fence;
        take_lease(ctx);
        break;
    case Outcome::replayed:
        if (!keep_stored(ctx, result)) {
            outcome = Outcome::unavailable;
        } else if (ctx->wait.waited) {
            outcome = Outcome::waited;
        }
        break;
    case Outcome::unreplayable:  // what its marker says, its 410 says too
        ctx->unreplayable_why = result.record != nullptr ? result.record->why : MarkerWhy::unsaid;
        break;
    case Outcome::conflict:  // the original is in flight
        if (ctx->conf->wait != 0 && feed_follow(ctx, result.stored, *ctx->hooks->follow)) {
            outcome = Outcome::joined;  // it is answering already: join it (join.cpp)
            break;
        }
        if (wait_for_original(ctx, answered)) {
            enter(ctx, RequestState::waiting);  // and watch for its answer to begin (feed_follow.cpp)
            return;
        }
        feed_leave(ctx);
        break;
    default:  // the store logged what was not usable; 410 and 422 never execute again
        break;
    }
    set_outcome(ctx, outcome);
    resume(r);
}

}  // namespace

// The virtual server and the caller's scope, then the key.
bool claim_name(RequestCtx* ctx, std::string_view key) noexcept
{
    ngx_http_request_t* r = ctx->request;
    ngx_str_t scope = ngx_null_string;
    if (ctx->conf->scope != nullptr && ngx_http_complex_value(r, ctx->conf->scope, &scope) != NGX_OK) {
        return false;
    }
    return store_key(r->pool, ctx->conf->key_prefix, ctx->conf->key_space, scope, key, ctx->claim.key);
}

bool make_claim_record(RequestCtx* ctx) noexcept
{
    ngx_http_request_t* r = ctx->request;
    u_char unique[token_length];
    if (!tokens.next(unique)) {
        return false;
    }
    // who holds the claim, for the operator's inspection (docs/design.md#who-holds-a-claim)
    ngx_time_t* tp = ngx_timeofday();
    Holder holder{{reinterpret_cast<const char*>(ngx_cycle->hostname.data), ngx_cycle->hostname.len},
                  static_cast<std::uint32_t>(ngx_pid),
                  static_cast<std::uint64_t>(tp->sec) * 1000 + tp->msec,
                  static_cast<std::uint32_t>(ngx_min(ctx->conf->lock_ttl, NGX_MAX_UINT32_VALUE))};
    char token[max_claim_token];
    std::string_view token_view{token, encode_claim_token(unique, holder, token)};
    size_t size = claim_size(token_view);
    ctx->claim.record.data = static_cast<u_char*>(ngx_pnalloc(r->pool, size));
    if (ctx->claim.record.data == nullptr) {
        return false;
    }
    ctx->claim.record.len = encode_claim(ctx->fingerprint, token_view, reinterpret_cast<char*>(ctx->claim.record.data));
    return ctx->claim.record.len == size;
}

void claim_key(RequestCtx* ctx) noexcept
{
    ngx_http_request_t* r = ctx->request;
    LocConf* conf = ctx->conf;
    if (ctx->claim.store == nullptr) {
        ctx->claim.store = store_for(*conf);
    }
    if (ctx->claim.store != nullptr) {
        ClaimWaiter waiter = location_waiter(*conf, on_claim, ctx, ctx->fingerprint);
        // the lease a grant of this attempt will have (used once the claim is ours)
        ctx->claim.lease_end = lease_end(ngx_current_msec, conf->lock_ttl, conf->redis_timeout);
        // an original settled after this, in any worker, is looked for at once if the claim must wait
        ctx->claim.settles_seen = live_board_settles(live_board_slot(view(ctx->claim.key)));
        ctx->claim.pending = claims(ctx)->claim(view(ctx->claim.key), view(ctx->claim.record), conf->lock_ttl, waiter);
    }
    if (ctx->claim.pending == nullptr) {
        if (unreachable_log.admit()) {
            ngx_str_t name = conf->zone != nullptr ? conf->zone->shm.name : conf->server->name;
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "idempotency: %s %V is unreachable (%ui requests since the last line)",
                          conf->zone != nullptr ? "zone" : "Redis", &name, unreachable_log.take());
        }
        set_outcome(ctx, Outcome::unavailable);
        resume(r);
        return;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: claiming \"%V\" for %M ms",
                   &ctx->claim.key, conf->lock_ttl);
    enter(ctx, RequestState::claiming);
    set_event(ctx->claim.timer, on_claim_timeout, ctx, r->connection->log);
    ngx_add_timer(&ctx->claim.timer, conf->redis_timeout);
}

void claim_joined(RequestCtx* ctx) noexcept
{
    claim_stop_waiting(ctx);
    set_outcome(ctx, Outcome::joined);
    resume(ctx->request);
}

void claim_stop_waiting(RequestCtx* ctx) noexcept
{
    if (ctx->claim.timer.timer_set) {
        ngx_del_timer(&ctx->claim.timer);
    }
    stop_waiting(ctx);
    if (ctx->claim.pending != nullptr) {
        claims(ctx)->abandon(ctx->claim.pending);
        ctx->claim.pending = nullptr;
    }
}

void claim_hold(RequestCtx* ctx) noexcept
{
    set_event(ctx->claim.renew_timer, on_renew, ctx, ctx->request->connection->log, true);
    ngx_add_timer(&ctx->claim.renew_timer, ngx_max(ctx->conf->lock_ttl / 3, 1));
}

void claim_stop_renewing(RequestCtx* ctx) noexcept
{
    if (ctx->claim.renew_timer.timer_set) {
        ngx_del_timer(&ctx->claim.renew_timer);
    }
}

}  // namespace idem
