// capture_buffer.cpp — the record buffer, in memory of its own (not r->pool)
// so the store can take the record over instead of copying it. Grows up to
// idempotency_max_response_size, or one piece for a response kept in pieces,
// when a full piece spills to the store and the buffer refills. Owns the
// buffer, its growth and spill, and the record made of it; must not touch
// the response's buffers. See docs/design.md#large-responses-in-pieces.

#include "capture_buffer.hpp"

#include <cstring>
#include <utility>

#include "capture_body.hpp"
#include "piece_writer.hpp"
#include "pieces.hpp"

namespace idem {
namespace {

constexpr size_t initial_body_capacity = 16 * 1024;

// need <= most.
bool grow(ngx_http_request_t* r, RequestCtx* ctx, size_t need, size_t most)
{
    size_t capacity = ngx_max(ctx->capture.capacity, initial_body_capacity);
    while (capacity < need) {
        capacity *= 2;
    }
    capacity = ngx_min(capacity, most);
    auto* grown = static_cast<char*>(ngx_alloc(ctx->capture.head_size + capacity, r->connection->log));
    if (grown == nullptr) {
        return false;
    }
    std::memcpy(grown + ctx->capture.head_size, ctx->capture.record + ctx->capture.head_size,
                ctx->capture.body_size - ctx->capture.flushed);
    ngx_free(ctx->capture.record);
    ctx->capture.record = grown;
    ctx->capture.capacity = capacity;
    return true;
}

// The first piece ends the live feed: duplicates follow a response live up
// to one piece.
bool flush_piece(RequestCtx* ctx)
{
    Capture& c = ctx->capture;
    if (c.pieces == nullptr) {
        c.pieces = begin_pieces(ctx);
        if (c.pieces == nullptr) {
            return false;
        }
        end_feed(ctx, LiveEnd::cut);
    }
    if (!pieces_put(c.pieces, {c.record + c.head_size, c.body_size - c.flushed})) {
        return false;
    }
    c.flushed = c.body_size;
    return true;
}

// The writer deletes the pieces when the record did not land.
void finish_pieces(RequestCtx* ctx, const Header* headers, size_t count, const ResponseExtras& extras)
{
    Capture& c = ctx->capture;
    if (pieces_failed(c.pieces)) {
        claim_unreplayable(ctx, "a piece of it could not be stored");
        return;  // the pieces go with stop_capture
    }
    PieceList list = pieces_list(c.pieces, c.body_size);
    size_t size = pieces_record_size(headers, count, extras, list.count);
    auto* record = size != 0 ? static_cast<char*>(ngx_alloc(size, ctx->request->connection->log)) : nullptr;
    if (record == nullptr
        || encode_pieces_record(record, ctx->fingerprint, static_cast<std::uint16_t>(ctx->response_status), headers,
                                count, extras, list)
               != size) {
        ngx_free(record);
        claim_unreplayable(ctx, size == 0 ? "its headers do not fit a record" : "out of memory");
        return;
    }
    claim_complete(ctx, RecordBytes::owned(record, {record, size}), pieces_record_notice(c.pieces));
    pieces_done(std::exchange(c.pieces, nullptr), true);
}

}  // namespace

size_t buffer_limit(const RequestCtx* ctx) noexcept
{
    return capture_limit(ctx->conf->max_response_size, ctx->conf->piece_size);
}

bool open_record(ngx_http_request_t* r, RequestCtx* ctx)
{
    auto* headers = static_cast<const Header*>(ctx->capture.headers.elts);
    // room for the head of a record with extras (flags, trailers), which
    // are known only once the last byte has passed
    ResponseExtras with_extras{expect_trailers};
    ctx->capture.head_size = response_head_size(headers, ctx->capture.headers.nelts, with_extras);
    off_t expected = r->headers_out.content_length_n;
    size_t capacity = expected >= 0 && static_cast<size_t>(expected) <= ctx->conf->max_response_size
                          ? ngx_min(static_cast<size_t>(expected), buffer_limit(ctx))
                          : ngx_min(initial_body_capacity, buffer_limit(ctx));
    ctx->capture.record = static_cast<char*>(ngx_alloc(ctx->capture.head_size + capacity, r->connection->log));
    if (ctx->capture.head_size == 0 || ctx->capture.record == nullptr) {
        return false;
    }
    ctx->capture.capacity = capacity;
    return true;
}

Room reserve(ngx_http_request_t* r, RequestCtx* ctx, size_t want, char*& to, size_t& got)
{
    Capture& c = ctx->capture;
    if (c.oversize) {
        return Room::none;
    }
    if (c.body_size + want > ctx->conf->max_response_size) {
        lose(ctx, nullptr);
        return Room::none;
    }
    size_t held = c.body_size - c.flushed;
    size_t limit = buffer_limit(ctx);
    if (held == limit && limit < ctx->conf->max_response_size) {
        if (c.pieces != nullptr && pieces_busy(c.pieces)) {
            return Room::wait;  // one piece at the store, one full: no more in memory
        }
        if (!flush_piece(ctx)) {
            lose(ctx, "a piece of it could not be stored");
            return Room::none;
        }
        held = 0;
    }
    want = ngx_min(want, limit - held);
    if (held + want > c.capacity && !grow(r, ctx, held + want, limit)) {
        lose(ctx, "out of memory");
        return Room::none;
    }
    got = want;
    to = c.record + c.head_size + held;
    return Room::some;
}

char* reserve_tail(ngx_http_request_t* r, RequestCtx* ctx, size_t tail) noexcept
{
    Capture& c = ctx->capture;
    size_t need = c.body_size + tail;
    if (c.oversize || need > ctx->conf->max_response_size) {
        lose(ctx, nullptr);
        return nullptr;
    }
    if (need > c.capacity && !grow(r, ctx, need, need)) {
        lose(ctx, "out of memory");
        return nullptr;
    }
    return c.record + c.head_size + c.body_size;
}

bool pieces_landed(RequestCtx* ctx) noexcept
{
    Capture& c = ctx->capture;
    if (pieces_busy(c.pieces)) {
        return false;
    }
    if (c.body_size > c.flushed) {
        // the last piece; the record waits until it has landed, so that
        // a piece sent again never lands after the record that lists it
        if (!flush_piece(ctx)) {
            lose(ctx, "a piece of it could not be stored");
            return true;
        }
        return !pieces_busy(c.pieces);
    }
    return true;
}

void complete_record(ngx_http_request_t* r, RequestCtx* ctx, const ResponseExtras& extras)
{
    auto* headers = static_cast<const Header*>(ctx->capture.headers.elts);
    if (ctx->capture.pieces != nullptr) {
        finish_pieces(ctx, headers, ctx->capture.headers.nelts, extras);
        return;
    }
    // Room was kept for a record with extras; the head goes right before the body.
    size_t head = response_head_size(headers, ctx->capture.headers.nelts, extras);
    size_t tail = response_tail_size(extras);
    char* tail_at = tail != 0 ? reserve_tail(r, ctx, tail) : nullptr;
    if (head == 0 || head > ctx->capture.head_size || (extras.any() && tail_at == nullptr)) {
        claim_unreplayable(ctx, ctx->capture.oversize ? "larger than idempotency_max_response_size"
                                                      : "its headers do not fit a record");
        return;
    }
    char* start = ctx->capture.record + ctx->capture.head_size - head;
    encode_response_head(start, ctx->fingerprint, static_cast<std::uint16_t>(ctx->response_status), headers,
                         ctx->capture.headers.nelts, ctx->capture.body_size, extras);
    encode_response_tail(tail_at, extras);
    claim_complete(ctx, RecordBytes::owned(std::exchange(ctx->capture.record, nullptr),
                                           {start, head + ctx->capture.body_size + tail}));
}

std::string_view captured_body(const RequestCtx* ctx) noexcept
{
    if (ctx->capture.record == nullptr || ctx->capture.flushed != 0) {
        return {};
    }
    return {ctx->capture.record + ctx->capture.head_size, ctx->capture.body_size};
}

void free_record(RequestCtx* ctx)
{
    ngx_free(ctx->capture.record);
    ctx->capture.record = nullptr;
    if (ctx->capture.pieces != nullptr) {
        pieces_done(std::exchange(ctx->capture.pieces, nullptr), false);
    }
}

void lose(RequestCtx* ctx, const char* why)
{
    ctx->capture.oversize = true;
    ctx->capture.lost_why = why;
    free_record(ctx);
}

}  // namespace idem
