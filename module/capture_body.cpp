// capture_body.cpp — the body of a claimed request's response as it
// passes the capture's filter (capture.cpp decides where): its bytes go
// into the record buffer (capture_buffer.cpp), read from a temporary file
// where nginx parked them; a response that may be kept in pieces fills one
// piece at a time, and a full piece goes to the store (piece_writer.hpp).
// The pace (docs/design.md#large-responses-in-pieces): at most one piece
// is at the store while the next one fills. When that one is full too
// before the store answered, the capture holds the rest of the body back —
// its links kept, the buffers left unconsumed, so that the upstream module
// finds them busy and reads the upstream no further (with proxy_buffering
// on, once its few buffers are busy, it stops reading rather than parking
// the response in a temporary file: the client's side looks ready) — and
// the client gets no more either. Meanwhile the request is blocked (it
// is not freed, whatever ends it) and its connection marked buffered (it
// is not ended under the capture). When the store answers, what is held
// is recorded and passed on, and the request's write handler runs, so that
// the upstream module reads on. A client slower than the store paces the
// upstream itself, as it always does; a client gone (client_gone.cpp) is
// no reason to stop: what is held is recorded and swallowed.
// Owns: the held chain and the capture's pace (Capture's pace, held,
// held_taken and resume parts).
// Must not touch: the buffers it holds, but to read them.

#include "capture_body.hpp"

#include <cstring>

#include "capture_buffer.hpp"
#include "client_gone.hpp"
#include "feed.hpp"
#include "piece_writer.hpp"

namespace idem {
namespace {

// The store answered a piece: a capture that waits for it goes on, from
// the event loop (the answer may come from within the writer's own call).
void piece_answered(void* data)
{
    auto* ctx = static_cast<RequestCtx*>(data);
    if (ctx->capture.pace == Pace::holding && !ctx->capture.resume.posted) {
        ngx_post_event(&ctx->capture.resume, &ngx_posted_events);
    }
}

// What is held is recorded and passed on; then the request's write handler
// runs (posted), so that whoever sends the body — the upstream module, or
// nginx's writer once the upstream is done — carries on, and a request
// ended meanwhile (its client gone) is finalized.
void on_resume(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    ngx_http_request_t* r = ctx->request;
    record_body(r, ctx, nullptr, next_body_filter_at(ctx->capture.point));
    if (ctx->capture.pace == Pace::flowing) {
        ngx_post_event(r->connection->write, &ngx_posted_events);
    }
}

// Records what a buffer holds past the Capture::held_taken bytes recorded
// already, in memory or in a file (the upstream's response parked in a
// temporary file, or a static file); false when the capture must wait for
// the store first (held_taken then says how far it got).
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

// Records the links from `cl` on; returns the first that must wait for
// the store (recorded in part, or the last one, recorded, whose record
// waits for its pieces), nullptr when none must.
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

// Copies of the links from `from` up to `until` (nullptr: the end), added
// at the end of `*to`; false when out of memory.
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

// The capture holds the body back until the store answers (`hold`), or no
// longer: the request is blocked meanwhile, its connection marked buffered.
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

// Whether filters below the capture hold some of the response, so that a
// call with nothing new still has them send it (with nothing held below,
// nginx's writer would report an empty chain).
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
