// client_gone.cpp — every way the client leaves: a claimed request's upstream
// exchange runs to its end and its response is still captured, the body
// filter swallowing what would have been sent. Owns ClientGuard; must not
// touch requests without a claim. See docs/design.md#client-leaves.

#include "client_gone.hpp"

#include "capture_body.hpp"
#include "request_ctx.hpp"

namespace idem {
namespace {

// As if proxy_ignore_client_abort were on for this request only.
ngx_int_t protected_content_handler(ngx_http_request_t* r)
{
    RequestCtx* ctx = find_ctx(r);
    ngx_http_event_handler_pt read_before = r->read_event_handler;
    ngx_http_event_handler_pt write_before = r->write_event_handler;

    ngx_int_t rc = ctx->client.content_handler(r);

    ngx_http_upstream_t* u = r->upstream;
    if (u != nullptr && u->conf != nullptr && !u->conf->ignore_client_abort) {
        auto* conf = static_cast<ngx_http_upstream_conf_t*>(ngx_palloc(r->pool, sizeof(ngx_http_upstream_conf_t)));
        if (conf != nullptr) {
            *conf = *u->conf;
            conf->ignore_client_abort = 1;
            u->conf = conf;
            // The upstream installed its broken-connection checks already.
            if (r->read_event_handler != read_before) {
                r->read_event_handler = ngx_http_block_reading;
            }
            if (r->write_event_handler != write_before) {
                r->write_event_handler = ngx_http_request_empty_handler;
            }
        }
    }
    return rc;
}

// A client that stops reading is one that closes: at send_timeout during the
// capture the client is let go and the exchange runs on, instead of the
// upstream module ending it and draining the rest unseen. Sits in front of
// the upstream module's write handler.
void client_timeout_guard(ngx_http_request_t* r)
{
    RequestCtx* ctx = find_ctx(r);
    ngx_event_t* wev = r->connection->write;
    if (wev->timedout && ctx != nullptr && following(ctx)) {
        wev->timedout = 0;
        if (!client_left(ctx)) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "idempotency: client timed out, the response to \"%V\" is still captured", &ctx->claim.key);
            detach(r, ctx);
        }
    }
    if (ctx != nullptr && ctx->client.write_handler != nullptr) {
        ctx->client.write_handler(r);
    }
}

// Whatever the filters above the capture still hold (the copy filter reads a
// temporary file only as fast as the client takes it) is handed down now,
// captured and swallowed, so the response is stored whole.
void drain_for_capture(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    if (!capturing(ctx) || ctx->response_status == 0) {
        return;
    }
    ngx_http_request_t* r = ctx->request;
    if (!client_left(ctx)) {
        detach(r, ctx);
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: the request ends before its client got the response to \"%V\": capturing the rest",
                   &ctx->claim.key);
    ngx_http_output_filter(r, nullptr);
}

}  // namespace

bool drain_when_terminated(RequestCtx* ctx) noexcept
{
    ngx_http_cleanup_t* cln = ngx_http_cleanup_add(ctx->request, 0);
    if (cln == nullptr) {
        return false;
    }
    cln->handler = drain_for_capture;
    cln->data = ctx;
    return true;
}

// Consuming what the filters below hold keeps nginx reading the upstream.
void consume(ngx_chain_t* cl)
{
    for (; cl; cl = cl->next) {
        ngx_buf_t* b = cl->buf;
        b->pos = b->last;
        if (b->in_file) {
            b->file_pos = b->file_last;
        }
    }
}

void detach(ngx_http_request_t* r, RequestCtx* ctx)
{
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "idempotency: client gone, the response to \"%V\" is still captured", &ctx->claim.key);
    enter(ctx, RequestState::client_gone);
    consume(r->out);
    r->out = nullptr;
    // what the filters below held is dropped; what the capture holds back
    // it still records (capture_body.cpp)
    r->connection->buffered &= capture_buffered;
    r->buffered = 0;
    r->keepalive = 0;  // what the client holds is a cut response
}

void guard_client_timeout(RequestCtx* ctx) noexcept
{
    ngx_http_request_t* r = ctx->request;
    if (r->write_event_handler != client_timeout_guard) {
        ctx->client.write_handler = r->write_event_handler;
        r->write_event_handler = client_timeout_guard;
    }
}

void protect_content_handler(RequestCtx* ctx) noexcept
{
    ngx_http_request_t* r = ctx->request;
    if (r->content_handler != nullptr && r->content_handler != protected_content_handler) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "idempotency: protecting the content handler of \"%V\" from client aborts", &r->uri);
        ctx->client.content_handler = r->content_handler;
        r->content_handler = protected_content_handler;
    }
}

}  // namespace idem
