// capture_body.cpp — the response body as it passes the capture's filter,
// into the record buffer (read back from a temporary file where nginx parked
// it); a response kept in pieces sends each full piece to the store. Owns
// the capture's pace and held chain; must not touch the buffers it holds but
// to read them. See docs/design.md#large-responses-in-pieces.
// At most one piece is at the store while the next fills; when that fills
// too first, the rest of the body is held back with its buffers unconsumed,
// so the upstream module finds them busy and reads no further (with
// proxy_buffering on it then stops rather than parking to a temporary file).
// Meanwhile the request is blocked (not freed) and its connection marked
// buffered (not ended under the capture). A gone client is no reason to stop.

#include "capture_body.hpp"

#include <cstring>

#include "capture_buffer.hpp"
#include "client_gone.hpp"
#include "feed.hpp"
#include "piece_writer.hpp"

namespace idem {
namespace {

// Resumed from the event loop: the answer may come from within the writer's own call.
void piece_answered(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    if (ctx->capture.pace == Pace::holding && !ctx->capture.resume.posted) {
        ngx_post_event(&ctx->capture.resume, &ngx_posted_events);
    }
}

// Then the write handler runs (posted), so whoever sends the body carries on,
// and a request ended meanwhile (client gone) is finalized.
void on_resume(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    ngx_http_request_t* r = ctx->request;
    record_body(r, ctx, nullptr, next_body_filter_at(ctx->capture.point));
    if (ctx->capture.pace == Pace::flowing) {
        ngx_post_event(r->connection->write, &ngx_posted_events);
    }
}

// False when the capture must wait for the store first (held_taken then
// says how far it got).
bool append(ngx_http_request_t* r, RequestCtx* ctx, const ngx_buf_t* b)
{
    off_t size = ngx_buf_size(b);
    for (off_t& done = ctx->capture.held_taken; done < size;) {
        size_t got = 0;
        char* to = nullptr;
        Room room = reserve(r, ctx, static_cast<size_t>(size - done), to, got);
        if (room == Room::wait) {
            return false;
        }
        if (room == Room::none) {
            end_feed(ctx, LiveEnd::cut);
            return true;
        }
        if (ngx_buf_in_memory(b)) {
            std::memcpy(to, b->pos + done, got);
        } else if (ngx_read_file(b->file, reinterpret_cast<u_char*>(to), got, b->file_pos + done)
                   != static_cast<ssize_t>(got)) {
            lose(ctx, "its body could not be read back from a temporary file");
            end_feed(ctx, LiveEnd::aborted);
            return true;
        }
        ctx->capture.body_size += got;
        if (ctx->capture.feed != nullptr) {
            feed_body(ctx->capture.feed, {to, got});
        }
        done += static_cast<off_t>(got);
    }
    return true;
}

// The first link that must wait for the store (recorded in part, or the
// last, whose record waits for its pieces); nullptr when none must.
ngx_chain_t* record_links(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* cl)
{
    for (; cl != nullptr; cl = cl->next) {
        ngx_buf_t* b = cl->buf;
        if (capturing(ctx) && !append(r, ctx, b)) {
            return cl;
        }
        if (b->last_buf && capturing(ctx) && !finish(r, ctx)) {
            ctx->capture.held_taken = ngx_buf_size(b);
            return cl;
        }
        ctx->capture.held_taken = 0;
    }
    return nullptr;
}

// Appended to `*to`; false when out of memory.
bool copy_links(ngx_pool_t* pool, ngx_chain_t** to, ngx_chain_t* from, ngx_chain_t* until)
{
    while (*to != nullptr) {
        to = &(*to)->next;
    }
    for (; from != until; from = from->next) {
        ngx_chain_t* cl = ngx_alloc_chain_link(pool);
        if (cl == nullptr) {
            return false;
        }
        cl->buf = from->buf;
        cl->next = nullptr;
        *to = cl;
        to = &cl->next;
    }
    return true;
}

void hold_back(RequestCtx* ctx, bool hold)
{
    Capture& c = ctx->capture;
    ngx_http_request_t* r = ctx->request;
    if (hold) {
        r->connection->buffered |= capture_buffered;
    } else {
        r->connection->buffered &= ~capture_buffered;
    }
    if (hold == (c.pace == Pace::holding)) {
        return;
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: the response to \"%V\" %s", &ctx->claim.key,
                   hold ? "is held back until the store answers a piece" : "flows on");
    if (hold) {
        c.pace = Pace::holding;
        r->main->blocked++;
    } else {
        c.pace = Pace::flowing;
        r->main->blocked--;
        if (c.resume.posted) {
            ngx_delete_posted_event(&c.resume);
        }
    }
}

// With nothing held below, nginx's writer would report an empty chain.
bool others_buffered(const ngx_http_request_t* r)
{
    return (r->connection->buffered & ~capture_buffered) != 0 || r->buffered != 0 || r->postponed != nullptr;
}

}  // namespace

ngx_int_t record_body(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* in, ngx_http_output_body_filter_pt next)
{
    Capture& c = ctx->capture;
    if (capturing(ctx)) {
        guard_client_timeout(ctx);
    }
    ngx_chain_t* out = nullptr;  // what goes on now
    bool copied = true;
    if (c.held == nullptr) {
        ngx_chain_t* stop = record_links(r, ctx, in);
        if (stop == nullptr) {
            out = in;
        } else {
            // `in` is the caller's: what goes on and what waits are copies
            copied = copy_links(r->pool, &out, in, stop) && copy_links(r->pool, &c.held, stop, nullptr);
        }
    } else if ((copied = copy_links(r->pool, &c.held, in, nullptr))) {
        // what came goes behind what is held
        ngx_chain_t* stop = record_links(r, ctx, c.held);
        ngx_chain_t** cut = &c.held;
        while (*cut != stop) {
            cut = &(*cut)->next;
        }
        out = c.held != stop ? c.held : nullptr;
        *cut = nullptr;
        c.held = stop;
    }
    if (!copied) {
        lose(ctx, "out of memory");
        hold_back(ctx, false);
        return NGX_ERROR;
    }
    hold_back(ctx, c.held != nullptr);
    ngx_int_t held = c.held != nullptr ? NGX_AGAIN : NGX_OK;

    if (client_left(ctx)) {
        consume(out);
        return held;
    }
    if (out == nullptr && !others_buffered(r)) {
        return held;
    }
    ngx_int_t rc = next(r, out);
    if (rc == NGX_ERROR && r->connection->error && capturing(ctx)) {
        consume(out);
        detach(r, ctx);
        return held;
    }
    return rc == NGX_OK ? held : rc;
}

PieceWriter* begin_pieces(RequestCtx* ctx)
{
    PieceWriter* pieces = pieces_begin(ctx, piece_answered, ctx);
    if (pieces != nullptr) {
        set_event(ctx->capture.resume, on_resume, ctx, ctx->request->connection->log);
    }
    return pieces;
}

bool passes_capture(const RequestCtx* ctx) noexcept
{
    return following(ctx) || ctx->capture.held != nullptr;
}

void release_hold(RequestCtx* ctx) noexcept
{
    if (ctx->capture.pace == Pace::holding) {
        hold_back(ctx, false);
    }
}

}  // namespace idem
