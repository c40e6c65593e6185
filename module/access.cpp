// access.cpp — the pre-content phase handler, run once nginx's access checks
// admitted the request: a small per-request state machine.
//   key header -> read the whole body -> fingerprint (body_fingerprint.cpp)
//   -> claim in the store
//   -> forward (capture.cpp records the response) or answer: replay, 409,
//   410, 422, 503.
// Owns the request context's lifetime: its pool cleanup cancels what is
// still pending and settles a claim whose response never completed.

#include <openssl/rand.h>

#include <cstring>

#include "body_fingerprint.hpp"
#include "conf.hpp"
#include "key.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "response.hpp"
#include "redis/redis_store.hpp"
#include "zone/zone_store.hpp"

namespace idem {
namespace {

constexpr size_t token_length = 16;
constexpr ngx_msec_t first_wait_delay = 25;   // idempotency_wait backoff: 25 ms ...
constexpr ngx_msec_t max_wait_delay = 500;    // ... doubling up to 500 ms

void start_claim(ngx_http_request_t* r, RequestCtx* ctx);

LogLimiter unreachable_log, timeout_log, fail_open_log;

void cleanup(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    if (ctx->timer.timer_set) {
        ngx_del_timer(&ctx->timer);
    }
    if (ctx->wait_timer.timer_set) {
        ngx_del_timer(&ctx->wait_timer);
    }
    if (ctx->pending != nullptr) {
        ctx->store->abandon(ctx->pending);
        ctx->pending = nullptr;
    }
    capture_settle(ctx);
    count_outcome(static_cast<unsigned>(ctx->status));
}

RequestCtx* create_ctx(ngx_http_request_t* r, LocConf* conf)
{
    auto* ctx = static_cast<RequestCtx*>(ngx_pcalloc(r->pool, sizeof(RequestCtx)));
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (ctx == nullptr || cln == nullptr) {
        return nullptr;
    }
    ctx->request = r;
    ctx->conf = conf;
    cln->handler = cleanup;
    cln->data = ctx;
    ngx_http_set_ctx(r, ctx, ngx_http_idempotency_module);
    return ctx;
}

// ---------------------------------------------------------------- answers

// What the pre-content phase returns once the claim is decided. Runs again
// when an internal redirect brings the request back to the phase: by then
// the module has answered, or follows its claimed request to the location
// that now serves it.
ngx_int_t respond(ngx_http_request_t* r, RequestCtx* ctx)
{
    std::string_view status = status_name(ctx->status);
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: \"%V\": %*s%s", &ctx->redis_key,
                   status.size(), status.data(), ctx->responded ? " (already answered)" : "");
    if (ctx->responded) {
        if (ctx->capturing) {
            capture_follow(ctx);
        }
        return NGX_DECLINED;
    }
    ctx->responded = true;

    switch (ctx->status) {
    case Status::fresh:
        capture_begin(ctx);
        return NGX_DECLINED;
    case Status::replayed:
    case Status::waited:
        return replay(r, ctx, view(ctx->stored));
    case Status::unavailable:
        if (ctx->conf->fail_open) {
            if (fail_open_log.admit()) {
                ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                              "idempotency: store unavailable, forwarding requests unprotected (%ui since the last line)",
                              fail_open_log.take());
            }
            return NGX_DECLINED;
        }
        return send_problem(r, NGX_HTTP_SERVICE_UNAVAILABLE, 1);
    case Status::conflict:
        return send_problem(r, NGX_HTTP_CONFLICT, 1);
    case Status::mismatch:
        return send_problem(r, 422, 0);
    case Status::unreplayable:
        return send_problem(r, 410, 0);
    case Status::invalid:
    case Status::missing:
        return send_problem(r, NGX_HTTP_BAD_REQUEST, 0);
    case Status::none:
    case Status::released:
        break;
    }
    return NGX_DECLINED;
}

void set_outcome(RequestCtx* ctx, Status status)
{
    ctx->status = status;
    ctx->decided = true;
}

// The claim's answer arrived (or timed out): run the phases again, which
// brings the request back to precontent_handler and on to respond().
void resume(ngx_http_request_t* r)
{
    ngx_connection_t* c = r->connection;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

// idempotency_wait: look again after a growing delay, until the original
// has finished (replay), was released (this request executes), or the wait
// is over (409). Each look is one claim attempt: one round trip.
void on_wait_timer(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    start_claim(ctx->request, ctx);
}

bool wait_for_original(RequestCtx* ctx)
{
    LocConf* conf = ctx->conf;
    if (conf->wait == 0) {
        return false;
    }
    if (!ctx->waited) {
        ctx->waited = true;
        ctx->wait_deadline = ngx_current_msec + conf->wait;
        ctx->wait_delay = first_wait_delay;
    }
    if (ngx_current_msec >= ctx->wait_deadline) {
        return false;
    }
    ngx_msec_t delay = ngx_min(ctx->wait_delay, ctx->wait_deadline - ngx_current_msec);
    ctx->wait_delay = ngx_min(ctx->wait_delay * 2, max_wait_delay);
    ctx->wait_timer.handler = on_wait_timer;
    ctx->wait_timer.data = ctx;
    ctx->wait_timer.log = ctx->request->connection->log;
    ngx_add_timer(&ctx->wait_timer, delay);
    return true;
}

void on_claim(void* data, const ClaimResult& result)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    ngx_http_request_t* r = ctx->request;
    ctx->pending = nullptr;
    if (ctx->timer.timer_set) {
        ngx_del_timer(&ctx->timer);
    }

    if (ctx->waited && result.decision != Decision::in_flight) {
        observe_wait(ngx_current_msec - (ctx->wait_deadline - ctx->conf->wait));
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: claim of \"%V\" answered: decision %d%s",
                   &ctx->redis_key, static_cast<int>(result.decision), ctx->waited ? ", after waiting" : "");
    switch (result.decision) {
    case Decision::execute:
        ctx->owns_claim = true;
        set_outcome(ctx, Status::fresh);
        break;
    case Decision::replay:
        ctx->stored.data = static_cast<u_char*>(ngx_pnalloc(r->pool, result.stored.size()));
        if (ctx->stored.data == nullptr) {
            set_outcome(ctx, Status::unavailable);
            break;
        }
        std::memcpy(ctx->stored.data, result.stored.data(), result.stored.size());
        ctx->stored.len = result.stored.size();
        set_outcome(ctx, ctx->waited ? Status::waited : Status::replayed);
        break;
    case Decision::in_flight:
        if (wait_for_original(ctx)) {
            return;
        }
        set_outcome(ctx, Status::conflict);
        break;
    case Decision::mismatch:
        set_outcome(ctx, Status::mismatch);
        break;
    case Decision::unreplayable:
        set_outcome(ctx, Status::unreplayable);
        break;
    case Decision::unverifiable:  // the store logged why; never replayed, never executed again
        ctx->unverifiable = true;
        set_outcome(ctx, Status::unreplayable);
        break;
    case Decision::corrupt:
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "idempotency: the value under \"%V\" is not a record of this module", &ctx->redis_key);
        set_outcome(ctx, Status::unavailable);
        break;
    case Decision::unavailable:  // the store logged why
        set_outcome(ctx, Status::unavailable);
        break;
    }
    resume(r);
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
    if (ctx->pending != nullptr) {
        ctx->store->abandon(ctx->pending);
        ctx->pending = nullptr;
    }
    set_outcome(ctx, Status::unavailable);
    resume(ctx->request);
}

// ------------------------------------------------------------- the claim

// The claim token only has to be unique, so that a claim can be told from
// any other (fencing), not secret: 8 random bytes drawn once per worker,
// then a counter. Drawing 16 random bytes per request cost more than the
// rest of the claim.
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

bool make_claim_record(ngx_http_request_t* r, RequestCtx* ctx)
{
    u_char token[token_length];
    if (!tokens.next(token)) {
        return false;
    }
    std::string_view token_view{reinterpret_cast<char*>(token), sizeof(token)};
    size_t size = claim_size(token_view);
    ctx->claim.data = static_cast<u_char*>(ngx_pnalloc(r->pool, size));
    if (ctx->claim.data == nullptr) {
        return false;
    }
    ctx->claim.len = encode_claim(ctx->fingerprint, token_view, reinterpret_cast<char*>(ctx->claim.data));
    return ctx->claim.len == size;
}

// The request is fingerprinted: claim the key.
void fingerprinted(ngx_http_request_t* r, bool ok)
{
    RequestCtx* ctx = find_ctx(r);
    if (!ok || !make_claim_record(r, ctx)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "idempotency: cannot fingerprint the request");
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    start_claim(r, ctx);
}

// The whole body is here (memory, temporary file, de-chunked).
void body_ready(ngx_http_request_t* r)
{
    fingerprint_request(r, find_ctx(r)->fingerprint, fingerprinted);
}

void start_claim(ngx_http_request_t* r, RequestCtx* ctx)
{
    LocConf* conf = ctx->conf;
    ctx->store = conf->zone != nullptr ? zone::store_for(conf->zone)
                                       : redis::store_for(*conf->server, conf->redis_timeout);
    if (ctx->store != nullptr) {
        ngx_array_t* keys = conf->seal_keys;
        ctx->pending = ctx->store->claim(view(ctx->redis_key), view(ctx->claim), ctx->fingerprint, conf->lock_ttl,
                                         keys ? static_cast<SecretKey*>(keys->elts) : nullptr,
                                         keys ? keys->nelts : 0, on_claim, ctx);
    }
    if (ctx->pending == nullptr) {
        if (unreachable_log.admit()) {
            ngx_str_t name = conf->zone != nullptr ? conf->zone->shm.name : conf->server->name;
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "idempotency: %s %V is unreachable (%ui requests since the last line)",
                          conf->zone != nullptr ? "zone" : "Redis", &name, unreachable_log.take());
        }
        set_outcome(ctx, Status::unavailable);
        resume(r);
        return;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: claiming \"%V\" for %M ms",
                   &ctx->redis_key, conf->lock_ttl);
    ctx->timer.handler = on_claim_timeout;
    ctx->timer.data = ctx;
    ctx->timer.log = r->connection->log;
    ngx_add_timer(&ctx->timer, conf->redis_timeout);
}

// ------------------------------------------------------------ the key

enum class KeyLookup { none, one, many };

KeyLookup find_key_header(ngx_http_request_t* r, const ngx_str_t& name, ngx_str_t& value)
{
    KeyLookup found = KeyLookup::none;
    for_each_header(r->headers_in.headers, [&](ngx_table_elt_t& h) {
        if (h.key.len != name.len || ngx_strncasecmp(h.key.data, name.data, name.len) != 0) {
            return true;
        }
        found = found == KeyLookup::none ? KeyLookup::one : KeyLookup::many;
        value = h.value;
        return found == KeyLookup::one;
    });
    return found;
}

bool derive_key(ngx_http_request_t* r, RequestCtx* ctx, std::string_view key)
{
    ngx_str_t scope = ngx_null_string;
    if (ctx->conf->scope != nullptr && ngx_http_complex_value(r, ctx->conf->scope, &scope) != NGX_OK) {
        return false;
    }
    const ngx_str_t& prefix = ctx->conf->key_prefix;
    ctx->redis_key.data = static_cast<u_char*>(ngx_pnalloc(r->pool, prefix.len + key_hash_hex_length));
    if (ctx->redis_key.data == nullptr) {
        return false;
    }
    ctx->redis_key.len = derive_redis_key(view(prefix), view(scope), key, reinterpret_cast<char*>(ctx->redis_key.data));
    return ctx->redis_key.len != 0;
}

}  // namespace

RequestCtx* find_ctx(ngx_http_request_t* r) noexcept
{
    auto* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_idempotency_module));
    if (ctx != nullptr || r != r->main) {
        return ctx;
    }
    // An internal redirect (error_page, named location) wiped the module
    // contexts; the pool cleanup still knows ours.
    for (ngx_pool_cleanup_t* cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == cleanup) {
            ctx = static_cast<RequestCtx*>(cln->data);
            ngx_http_set_ctx(r, ctx, ngx_http_idempotency_module);
            return ctx;
        }
    }
    return nullptr;
}

// The module acts in the pre-content phase, after the whole access phase
// (allow/deny, auth_basic, auth_request, under `satisfy all` or `any`)
// admitted the request and set its variables, and before try_files and the
// content handler. A request that an internal redirect brings back here
// (try_files, error_page, named locations, X-Accel-Redirect) keeps what was
// decided; a claimed one has the new location's content handler protected.
ngx_int_t precontent_handler(ngx_http_request_t* r)
{
    if (r != r->main) {
        return NGX_DECLINED;
    }
    RequestCtx* ctx = find_ctx(r);
    if (ctx != nullptr) {
        return ctx->decided ? respond(r, ctx) : NGX_DONE;
    }

    auto* conf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));
    if (!conf->enable || !(r->method & conf->methods)) {
        return NGX_DECLINED;
    }
    ctx = create_ctx(r, conf);
    if (ctx == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_t value = ngx_null_string;
    KeyLookup found;
    if (conf->key != nullptr) {
        // idempotency_key: the key is whatever the variables give; empty is none
        if (ngx_http_complex_value(r, conf->key, &value) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        found = value.len ? KeyLookup::one : KeyLookup::none;
    } else {
        found = find_key_header(r, conf->header, value);
    }
    switch (found) {
    case KeyLookup::none:
        set_outcome(ctx, Status::missing);
        if (!conf->required) {
            ctx->responded = true;
            return NGX_DECLINED;
        }
        return respond(r, ctx);
    case KeyLookup::many:
        set_outcome(ctx, Status::invalid);
        return respond(r, ctx);
    case KeyLookup::one:
        break;
    }

    auto* key = static_cast<char*>(ngx_pnalloc(r->pool, value.len ? value.len : 1));
    if (key == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ParsedKey parsed = parse_key(view(value), key);
    if (parsed.status != KeyStatus::ok) {
        set_outcome(ctx, Status::invalid);
        return respond(r, ctx);
    }
    if (!derive_key(r, ctx, {key, parsed.length})) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: key accepted, store key \"%V\"; reading the body", &ctx->redis_key);
    ngx_int_t rc = ngx_http_read_client_request_body(r, body_ready);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }
    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}

}  // namespace idem
