// request_ctx.cpp — the request context's lifetime: made, found again after
// an internal redirect, and the keyless requests' shared one. Must not touch
// what contexts hold.

#include "request_ctx.hpp"

#include "metrics.hpp"

namespace idem {
namespace {

void run_ended(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    ctx->hooks->ended(ctx);
}

// Nothing is claimed, captured or answered for a request without a key: all
// share this one, never written after start-up, answered already for an
// internal redirect's return to the phase.
RequestCtx keyless = [] {
    RequestCtx ctx{};
    ctx.outcome = Outcome::missing;
    ctx.state = RequestState::answered;
    return ctx;
}();

void count_keyless(void*)
{
    count_outcome(Outcome::missing);
}

}  // namespace

RequestCtx* create_ctx(ngx_http_request_t* r, LocConf* conf, const RequestHooks* hooks) noexcept
{
    auto* ctx = static_cast<RequestCtx*>(ngx_pcalloc(r->pool, sizeof(RequestCtx)));
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (ctx == nullptr || cln == nullptr) {
        return nullptr;
    }
    ctx->request = r;
    ctx->conf = conf;
    ctx->hooks = hooks;
    cln->handler = run_ended;
    cln->data = ctx;
    ngx_http_set_ctx(r, ctx, ngx_http_idempotency_module);
    return ctx;
}

ngx_int_t pass_keyless(ngx_http_request_t* r) noexcept
{
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cln->handler = count_keyless;
    cln->data = &keyless;
    ngx_http_set_ctx(r, &keyless, ngx_http_idempotency_module);
    return NGX_DECLINED;
}

RequestCtx* find_ctx(ngx_http_request_t* r) noexcept
{
    auto* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_idempotency_module));
    if (ctx != nullptr || r != r->main) {
        return ctx;
    }
    // An internal redirect (error_page, named location) wiped the module
    // contexts; the pool cleanup still knows ours.
    for (ngx_pool_cleanup_t* cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == run_ended || cln->handler == count_keyless) {
            ctx = static_cast<RequestCtx*>(cln->data);
            ngx_http_set_ctx(r, ctx, ngx_http_idempotency_module);
            return ctx;
        }
    }
    return nullptr;
}

}  // namespace idem
