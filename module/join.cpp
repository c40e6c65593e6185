// join.cpp — see join.hpp. The joiner's response leaves as a replay's: header
// through every header filter, body straight below the capture's point;
// its length unknown, HTTP/1.1 gets it chunked.

#include "join.hpp"

#include <cstring>

#include "claim.hpp"
#include "feed.hpp"
#include "replay_head.hpp"
#include "request_ctx.hpp"
#include "send.hpp"
#include "sse.hpp"

namespace idem {
namespace {

constexpr std::size_t chunk_size = 16 * 1024;  // the most one joiner holds in flight

const ngx_buf_tag_t join_tag = reinterpret_cast<ngx_buf_tag_t>(&ngx_http_idempotency_module);

// Reused once sent.
ngx_chain_t* chunk(ngx_http_request_t* r, RequestCtx* ctx)
{
    ngx_chain_t* cl = ngx_chain_get_free_buf(r->pool, &ctx->join.free);
    if (cl == nullptr) {
        return nullptr;
    }
    ngx_buf_t* b = cl->buf;
    if (b->start == nullptr) {
        b->start = static_cast<u_char*>(ngx_palloc(r->pool, chunk_size));
        if (b->start == nullptr) {
            return nullptr;
        }
        b->end = b->start + chunk_size;
        b->tag = join_tag;
    }
    b->pos = b->start;
    b->last = b->start;
    b->memory = 1;
    b->flush = 1;
    cl->next = nullptr;
    return cl;
}

// ctx, in its pool, may be gone after it.
void give_up(ngx_http_request_t* r, RequestCtx* ctx, ngx_int_t rc)
{
    feed_leave(ctx);
    enter(ctx, RequestState::answered);
    end_request(r, rc);
}

void end(ngx_http_request_t* r, RequestCtx* ctx, LiveEnd how)
{
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: the joined response to \"%V\" ends (%d)",
                   &ctx->claim.key, static_cast<int>(how));
    if (how != LiveEnd::complete) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "idempotency: the response to \"%V\" that this request joined was %s: so is this one",
                      &ctx->claim.key,
                      how == LiveEnd::cut ? "cut at idempotency_max_response_size, or at its first piece" : "cut off");
        r->connection->error = 1;
        give_up(r, ctx, NGX_ERROR);
        return;
    }
    give_up(r, ctx, ngx_http_send_special(r, NGX_HTTP_LAST));
}

// NULL: what is held. False when the request is over.
bool send(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* out)
{
    ngx_int_t rc = ngx_http_output_filter(r, out);
    ngx_chain_update_chains(r->pool, &ctx->join.free, &ctx->join.busy, &out, join_tag);
    if (rc == NGX_ERROR) {
        give_up(r, ctx, NGX_ERROR);
        return false;
    }
    if (ctx->join.busy == nullptr || await_client(r)) {
        return true;
    }
    give_up(r, ctx, NGX_ERROR);
    return false;
}

// A frame that does not fit is left part-read (Join::in_frame). True when the
// log's end was read.
bool fill(RequestCtx* ctx, std::string_view log, ngx_buf_t* b, LiveEnd& how)
{
    Join& j = ctx->join;
    while (j.pos < log.size() && b->last < b->end) {
        LiveItem item;
        std::size_t next = j.pos;
        LiveReadState read = j.read;
        if (read_live(log, next, read, item) != LiveStep::item) {
            return false;  // the feed checked its log: nothing bad here
        }
        if (item.kind == LiveItem::Kind::end) {
            j.pos = next;
            j.read = read;
            how = item.how;
            return true;
        }
        if (item.kind == LiveItem::Kind::body) {
            std::string_view body = item.body.substr(j.in_frame);
            std::size_t skipped = ngx_min(j.skip, body.size());
            j.skip -= skipped;
            body.remove_prefix(skipped);
            std::size_t n = ngx_min(body.size(), static_cast<std::size_t>(b->end - b->last));
            if (n != 0) {
                std::memcpy(b->last, body.data(), n);
                b->last += n;
            }
            j.in_frame += skipped + n;
            if (j.in_frame < item.body.size()) {
                return false;  // the chunk is full
            }
            j.in_frame = 0;
        }
        j.pos = next;
        j.read = read;
    }
    return false;
}

// A chunk at a time, while the client takes it.
void pump(RequestCtx* ctx)
{
    ngx_http_request_t* r = ctx->request;
    if (ctx->state != RequestState::joining) {
        return;  // its answer is on its way (join_send comes)
    }
    while (ctx->join.busy == nullptr) {  // else on_write comes when it has left
        std::string_view log = feed_log(ctx->follower.feed);
        LiveEnd how = LiveEnd::complete;
        bool ended = false;
        if (ctx->join.pos < log.size()) {
            ngx_chain_t* cl = chunk(r, ctx);
            if (cl == nullptr) {
                end(r, ctx, LiveEnd::aborted);
                return;
            }
            ended = fill(ctx, log, cl->buf, how);
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "idempotency: following the response to \"%V\": %uz bytes, at byte %uz of its live log",
                           &ctx->claim.key, static_cast<std::size_t>(cl->buf->last - cl->buf->pos), ctx->join.pos);
            if (cl->buf->last != cl->buf->pos && !send(r, ctx, cl)) {
                return;
            }
            if (cl->buf->last == cl->buf->pos) {
                cl->next = ctx->join.free;  // nothing to send: kept for the next
                ctx->join.free = cl;
            }
        }
        if (!ended && ctx->join.pos >= log.size()) {
            ended = feed_ended(ctx->follower.feed, how);
            if (!ended) {
                return;  // the feed tells when more comes
            }
        }
        if (ended) {
            if (ctx->join.busy == nullptr) {
                end(r, ctx, how);
            }
            return;
        }
    }
}

// Or timed out.
void on_write(ngx_http_request_t* r)
{
    RequestCtx* ctx = find_ctx(r);
    switch (client_write_event(r)) {
    case ClientWrite::timed_out:
        give_up(r, ctx, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    case ClientWrite::failed:
        give_up(r, ctx, NGX_ERROR);
        return;
    case ClientWrite::wait:
        return;
    case ClientWrite::ready:
        break;
    }
    if (send(r, ctx, nullptr) && ctx->join.busy == nullptr) {
        pump(ctx);
    }
}

std::size_t body_size(std::string_view log)
{
    std::size_t size = 0;
    LiveReadState read;
    LiveItem item;
    for (std::size_t pos = 0; read_live(log, pos, read, item) == LiveStep::item;) {
        if (item.kind == LiveItem::Kind::body) {
            size += item.body.size();
        }
    }
    return size;
}

// A copy in r->pool, for the event-stream scan.
std::string_view body_so_far(ngx_http_request_t* r, std::string_view log)
{
    std::size_t size = body_size(log);
    auto* body = static_cast<char*>(ngx_pnalloc(r->pool, size ? size : 1));
    if (body == nullptr) {
        return {};
    }
    char* p = body;
    LiveReadState read;
    LiveItem item;
    for (std::size_t pos = 0; read_live(log, pos, read, item) == LiveStep::item;) {
        if (item.kind == LiveItem::Kind::body) {
            std::memcpy(p, item.body.data(), item.body.size());
            p += item.body.size();
        }
    }
    return {body, size};
}

void on_ready(RequestCtx* ctx)
{
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "idempotency: the original of \"%V\" is answering: joining it", &ctx->claim.key);
    claim_joined(ctx);
}

}  // namespace

const FeedTell join_tell{on_ready, pump};

ngx_int_t join_send(ngx_http_request_t* r, RequestCtx* ctx) noexcept
{
    Feed* feed = ctx->follower.feed;
    enter(ctx, RequestState::joining);
    feed_attach(ctx);
    // the head copied: its headers live as long as the request
    const Record shared = feed_head(feed);
    std::string_view log = feed_log(feed);
    auto* head = static_cast<Record*>(ngx_palloc(r->pool, sizeof(Record)));
    auto* copy = static_cast<char*>(ngx_pnalloc(r->pool, shared.headers.size() + 1));
    if (head == nullptr || copy == nullptr) {
        feed_leave(ctx);
        enter(ctx, RequestState::answered);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    std::memcpy(copy, shared.headers.data(), shared.headers.size());
    *head = shared;
    head->headers = {copy, shared.headers.size()};
    head->body = {};
    head->trailers = {};
    head->trailer_count = 0;

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "idempotency: joining the response to \"%V\" as it streams", &ctx->claim.key);
    ngx_int_t rc = set_replay_headers(r, *head);
    if (rc == NGX_OK) {
        std::string_view id = resume_id(r);
        if (!id.empty()) {
            ctx->join.skip = resume_offset(r, id, body_so_far(r, log));
        }
        // a response whose end is here already has a known length
        LiveEnd how;
        bool whole = feed_ended(feed, how) && how == LiveEnd::complete;
        r->headers_out.content_length_n = whole ? static_cast<off_t>(body_size(log) - ctx->join.skip) : -1;
        rc = ngx_http_send_header(r);
    }
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        feed_leave(ctx);
        enter(ctx, RequestState::answered);
        ngx_http_finalize_request(r, rc == NGX_OK ? ngx_http_send_special(r, NGX_HTTP_LAST) : rc);
        return NGX_DONE;
    }
    // a client that leaves is noticed while nothing is sent to it
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = on_write;
    pump(ctx);
    return NGX_DONE;
}

}  // namespace idem
