// test_hooks.cpp — -DIDEM_TEST_HOOKS only, never in a release (whoever reaches
// the location could write any record): `idempotency_test_store_raw` reads,
// writes and deletes the bytes under any store key through the Store
// interface alone, so scripts/fuzz-gateway.pl can fill the zone as Redis.
//   GET    ?key=K            200 with the bytes (X-Ttl-Ms), 404 when absent
//   PUT    ?key=K[&ttl=MS]   the body becomes K's value (deleted first; ttl 600000)
//   DELETE ?key=K
// K as the store names it, URI-escaped. The body must fit
// client_body_buffer_size (413 otherwise).

#ifdef IDEM_TEST_HOOKS

#include "test_hooks.hpp"

#include <cstring>
#include <new>

#include "admin_key.hpp"
#include "conf.hpp"
#include "send.hpp"
#include "store_call.hpp"
#include "store_factory.hpp"

namespace idem {
namespace {

constexpr std::uint64_t default_ttl_ms = 600000;

struct RawCtx {
    ngx_http_request_t* request;
    const LocConf* conf;
    Store* store;
    StoreCall call;  // the read or the write in flight
    ngx_str_t key;
    std::uint64_t ttl_ms;
};

ngx_int_t send_bytes(ngx_http_request_t* r, ngx_uint_t status, std::string_view body)
{
    return send_uncached(r, status, "application/octet-stream", body);
}

// Marks the request's RawCtx among its pool cleanups (ctx_of).
void marker(void*) {}

// ctx, in its pool, may be gone after it.
void finish(RawCtx* ctx, ngx_int_t rc)
{
    ctx->call.abandon();
    end_request(ctx->request, rc);
}

void on_timeout(void* data)
{
    auto* ctx = static_cast<RawCtx*>(data);
    finish(ctx, send_bytes(ctx->request, NGX_HTTP_SERVICE_UNAVAILABLE, "the store did not answer\n"));
}

void on_written(void* data, LiveStatus status, std::string_view)
{
    auto* ctx = static_cast<RawCtx*>(data);
    ctx->call.answered();
    ngx_http_request_t* r = ctx->request;
    finish(ctx, status == LiveStatus::done   ? send_bytes(r, NGX_HTTP_OK, "written\n")
                : status == LiveStatus::gone ? send_bytes(r, NGX_HTTP_CONFLICT, "the key was taken meanwhile\n")
                                             : send_bytes(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the store failed\n"));
}

void on_read(void* data, LiveStatus status, std::string_view value, std::int64_t ttl_ms)
{
    auto* ctx = static_cast<RawCtx*>(data);
    ctx->call.answered();
    ngx_http_request_t* r = ctx->request;
    if (status != LiveStatus::done) {
        finish(ctx, status == LiveStatus::gone ? send_bytes(r, NGX_HTTP_NOT_FOUND, "")
                                               : send_bytes(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the store failed\n"));
        return;
    }
    auto* copy = static_cast<u_char*>(ngx_pnalloc(r->pool, value.size() + NGX_INT64_LEN + 1));
    if (copy == nullptr) {
        finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    std::memcpy(copy, value.data(), value.size());
    u_char* ttl = copy + value.size();
    u_char* end = ngx_sprintf(ttl, "%L", ttl_ms);
    if (!add_header(r, "X-Ttl-Ms", {reinterpret_cast<char*>(ttl), static_cast<size_t>(end - ttl)})) {
        finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    finish(ctx, send_bytes(r, NGX_HTTP_OK, {reinterpret_cast<char*>(copy), value.size()}));
}

// Not a module context, whose slot is the protected request's RequestCtx
// (the filters read it).
RawCtx* ctx_of(ngx_http_request_t* r)
{
    for (ngx_pool_cleanup_t* c = r->pool->cleanup; c != nullptr; c = c->next) {
        if (c->handler == marker) {
            return static_cast<RawCtx*>(c->data);
        }
    }
    return nullptr;
}

void on_body(ngx_http_request_t* r)
{
    RawCtx* ctx = ctx_of(r);
    if (ctx == nullptr) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    size_t size = 0;
    ngx_chain_t* bufs = r->request_body != nullptr ? r->request_body->bufs : nullptr;
    for (ngx_chain_t* cl = bufs; cl != nullptr; cl = cl->next) {
        if (cl->buf->in_file) {
            ngx_http_finalize_request(r, send_bytes(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                                    "the body must fit client_body_buffer_size\n"));
            return;
        }
        if (ngx_buf_in_memory(cl->buf)) {  // else a special buffer: no bytes
            size += static_cast<size_t>(cl->buf->last - cl->buf->pos);
        }
    }
    auto* body = static_cast<u_char*>(ngx_pnalloc(r->pool, size ? size : 1));
    if (body == nullptr) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    u_char* p = body;
    for (ngx_chain_t* cl = bufs; cl != nullptr; cl = cl->next) {
        if (ngx_buf_in_memory(cl->buf)) {
            p = ngx_cpymem(p, cl->buf->pos, cl->buf->last - cl->buf->pos);
        }
    }
    ctx->store->live_expire(view(ctx->key), 0);  // what was there goes; the append at 0 makes the key anew
    LiveOp* op = ctx->store->live_append(view(ctx->key), 0, {reinterpret_cast<char*>(body), size}, ctx->ttl_ms,
                                         on_written, ctx);
    if (!ctx->call.await(ctx->store, op, ctx->conf->redis_timeout)) {
        ngx_http_finalize_request(r, send_bytes(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the store cannot be reached\n"));
    }
}

ngx_int_t raw_handler(ngx_http_request_t* r)
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_PUT | NGX_HTTP_DELETE))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    auto* conf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));
    void* memory = ngx_palloc(r->pool, sizeof(RawCtx));
    auto* ctx = memory != nullptr ? new (memory) RawCtx() : nullptr;
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (ctx == nullptr || cln == nullptr || !ctx->call.bind(r->pool)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (!query_arg(r, "key", ctx->key) || ctx->key.len == 0) {
        return NGX_HTTP_BAD_REQUEST;
    }
    ctx->ttl_ms = default_ttl_ms;
    ngx_str_t ttl;
    if (query_arg(r, "ttl", ttl)) {
        ngx_int_t ms = ngx_atoi(ttl.data, ttl.len);
        if (ms <= 0) {
            return NGX_HTTP_BAD_REQUEST;
        }
        ctx->ttl_ms = static_cast<std::uint64_t>(ms);
    }
    ctx->request = r;
    ctx->conf = conf;
    ctx->store = (conf->zone != nullptr || conf->server != nullptr) ? store_for(*conf) : nullptr;
    if (ctx->store == nullptr) {
        return send_bytes(r, NGX_HTTP_SERVICE_UNAVAILABLE, "no store\n");
    }
    ctx->call.init(on_timeout, ctx, r->connection->log);
    cln->handler = marker;
    cln->data = ctx;

    if (r->method == NGX_HTTP_PUT) {
        r->request_body_in_single_buf = 1;
        ngx_int_t rc = ngx_http_read_client_request_body(r, on_body);
        return rc >= NGX_HTTP_SPECIAL_RESPONSE ? rc : NGX_DONE;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (r->method == NGX_HTTP_DELETE) {
        ctx->store->live_expire(view(ctx->key), 0);
        return send_bytes(r, NGX_HTTP_OK, "deleted\n");
    }
    if (!ctx->call.await(ctx->store, ctx->store->peek(view(ctx->key), on_read, ctx), conf->redis_timeout)) {
        return send_bytes(r, NGX_HTTP_SERVICE_UNAVAILABLE, "the store cannot be reached\n");
    }
    r->main->count++;
    return NGX_DONE;
}

}  // namespace

char* set_test_store_raw(ngx_conf_t* cf, ngx_command_t*, void*)
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = raw_handler;
    return NGX_CONF_OK;
}

}  // namespace idem

#endif  // IDEM_TEST_HOOKS
