// piece_replay.cpp — see piece_replay.hpp. The body goes straight below the
// capture's point, as a replay's, from one buffer of a piece's body bytes
// refilled once the client took it.

#include "piece_replay.hpp"

#include <cstring>
#include <new>

#include "compression.hpp"
#include "pieces.hpp"
#include "problem.hpp"
#include "replay_head.hpp"
#include "request_ctx.hpp"
#include "send.hpp"
#include "store_call.hpp"
#include "store_factory.hpp"

namespace idem {

struct PieceReplay {
    ngx_http_request_t* r;
    RequestCtx* ctx;
    const Record* record;
    PieceStore* store;
    StoreCall call;      // the look or the piece read in flight
    std::uint32_t next;  // the piece to read next
    bool header_sent;
    ngx_str_t base;      // the pieces' keys' base
    char key[max_piece_key_size];  // the key of the piece read now
    std::size_t key_len;
    char* plain;         // one piece's body bytes: allocated once the look passed
    char* opened;        // with encryption at rest: a piece opened
    ngx_buf_t* buf;
};

namespace {

// Ends the request: p, in its pool, may be gone after it, so each end is
// the last thing its caller does.
void finish(PieceReplay* p, ngx_int_t rc)
{
    p->call.abandon();
    end_request(p->r, rc);
}

void answer(PieceReplay* p, Outcome outcome)
{
    ngx_http_request_t* r = p->r;
    ngx_connection_t* c = r->connection;
    p->ctx->outcome = outcome;
    p->call.abandon();
    answer_problem(r, outcome_info(outcome));
    ngx_http_run_posted_requests(c);
}

// After the header: cut off, as nginx cuts an upstream's response that fails
// midway, never completed with anything else.
void cut(PieceReplay* p, const char* why)
{
    ngx_log_error(NGX_LOG_ERR, p->r->connection->log, 0,
                  "idempotency: the replay of \"%V\" is cut off at piece %uD of %uD: %s", &p->ctx->claim.key, p->next,
                  p->record->pieces.count, why);
    p->r->connection->error = 1;
    finish(p, NGX_ERROR);
}

void on_timeout(void* data)
{
    auto* p = static_cast<PieceReplay*>(data);
    ngx_log_error(NGX_LOG_ERR, p->r->connection->log, 0,
                  "idempotency: the store did not answer within idempotency_redis_timeout for the pieces of \"%V\"",
                  &p->ctx->claim.key);
    if (p->header_sent) {
        cut(p, "the store did not answer");
    } else {
        answer(p, Outcome::unavailable);
    }
}

void on_piece(void* data, LiveStatus status, std::string_view value);

void read_next(PieceReplay* p)
{
    p->key_len = write_piece_key(view(p->base), p->next, p->key);
    LiveOp* op = p->store->live_read({p->key, p->key_len}, 0, false, on_piece, p);
    if (!p->call.await(p->store, op, p->ctx->conf->redis_timeout)) {
        cut(p, "the store cannot be reached");
    }
}

void on_write(ngx_http_request_t* r)
{
    auto* p = static_cast<PieceReplay*>(find_ctx(r)->pieces);
    switch (client_write_event(r)) {
    case ClientWrite::timed_out:
        finish(p, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    case ClientWrite::failed:
        finish(p, NGX_ERROR);
        return;
    case ClientWrite::wait:
        return;
    case ClientWrite::ready:
        break;
    }
    if (ngx_http_output_filter(r, nullptr) == NGX_ERROR) {
        finish(p, NGX_ERROR);
        return;
    }
    if (p->buf->pos != p->buf->last) {
        if (!await_client(r)) {
            finish(p, NGX_ERROR);
        }
        return;
    }
    r->write_event_handler = ngx_http_request_empty_handler;
    read_next(p);
}

// Empty, with `why`, when the value is not the piece expected there.
std::string_view open_piece(PieceReplay* p, std::string_view value, const char*& why)
{
    const PieceList& list = p->record->pieces;
    ngx_array_t* keys = p->ctx->conf->seal_keys;
    // the size the record lists, as the look saw it: nothing larger is
    // opened into the room kept for a piece
    if (value.size() != list.stored_size(p->next)) {
        why = "it is not of the size the record lists";
        return {};
    }
    if (keys != nullptr) {
        std::string_view name{p->key, p->key_len};  // what a sealed piece is bound to
        std::size_t length = 0;
        if (!is_sealed(value)
            || open_sealed(static_cast<const SecretKey*>(keys->elts), keys->nelts, name, value, p->opened, length)
                   != OpenStatus::ok) {
            why = "it does not open with the configured keys";
            return {};
        }
        value = {p->opened, length};
    }
    std::optional<Piece> piece = decode_piece(value);
    std::uint32_t size = list.plain_size(p->next);
    if (!piece || piece->id != list.id || piece->index != p->next) {
        why = "it is not that piece of this response";
        return {};
    }
    if (piece->form == piece_form_plain && piece->payload.size() == size) {
        std::memcpy(p->plain, piece->payload.data(), size);
    } else if (piece->form != piece_form_zstd || !worker_inflater().inflate_frame(piece->payload, p->plain, size)) {
        why = "it does not open into its size";
        return {};
    }
    return {p->plain, size};
}

void on_piece(void* data, LiveStatus status, std::string_view value)
{
    auto* p = static_cast<PieceReplay*>(data);
    p->call.answered();
    ngx_http_request_t* r = p->r;
    if (status != LiveStatus::done || value.empty()) {
        cut(p, status == LiveStatus::done || status == LiveStatus::gone ? "it is gone" : "the store could not read it");
        return;
    }
    const char* why = nullptr;
    std::string_view body = open_piece(p, value, why);
    if (body.empty()) {
        cut(p, why);
        return;
    }
    bool last = ++p->next == p->record->pieces.count;
    ngx_buf_t* b = p->buf;
    b->pos = bytes(body);
    b->last = b->pos + body.size();
    b->memory = 1;
    b->flush = 1;
    b->last_buf = last ? 1 : 0;
    b->last_in_chain = last ? 1 : 0;
    ngx_chain_t out{b, nullptr};
    ngx_int_t rc = ngx_http_output_filter(r, &out);
    if (last || rc == NGX_ERROR) {
        finish(p, rc);
        return;
    }
    if (b->pos == b->last) {
        read_next(p);
        return;
    }
    r->write_event_handler = on_write;
    if (!await_client(r)) {
        finish(p, NGX_ERROR);
    }
}

// Only once the look showed every piece, and one piece's at most (the
// record's piece size, which decide.cpp held to the location's).
bool take_room(PieceReplay* p)
{
    ngx_pool_t* pool = p->r->pool;
    std::size_t size = p->record->pieces.size;
    p->plain = static_cast<char*>(ngx_palloc(pool, size));
    if (p->ctx->conf->seal_keys != nullptr) {
        p->opened = static_cast<char*>(ngx_palloc(pool, piece_head_size + size));
        return p->plain != nullptr && p->opened != nullptr;
    }
    return p->plain != nullptr;
}

void on_look(void* data, LiveStatus status, std::string_view look)
{
    auto* p = static_cast<PieceReplay*>(data);
    p->call.answered();
    ngx_http_request_t* r = p->r;
    const PieceList& list = p->record->pieces;
    if (status != LiveStatus::done) {
        answer(p, Outcome::unavailable);
        return;
    }
    std::uint32_t bad = first_bad_piece(list, look, p->ctx->conf->seal_keys != nullptr);
    if (bad != list.count) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "idempotency: the record under \"%V\" is not replayed: its piece %uD of %uD is missing, of "
                      "another response, or altered",
                      &p->ctx->claim.key, bad, list.count);
        answer(p, Outcome::unverifiable);
        return;
    }
    if (!take_room(p)) {
        finish(p, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    ngx_int_t rc = set_replay_headers(r, *p->record);
    if (rc == NGX_OK) {
        bool trailers_follow = p->record->trailer_count != 0 || r->expect_trailers;
        r->headers_out.content_length_n = trailers_follow ? -1 : static_cast<off_t>(list.body_size);
        rc = ngx_http_send_header(r);
        p->header_sent = true;
    }
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        finish(p, rc);
        return;
    }
    read_next(p);
}

}  // namespace

ngx_int_t replay_pieces(ngx_http_request_t* r, RequestCtx* ctx) noexcept
{
    const Record* record = ctx->stored;
    std::string_view key = view(ctx->claim.key);
    void* memory = ngx_palloc(r->pool, sizeof(PieceReplay));
    auto* p = memory != nullptr ? new (memory) PieceReplay() : nullptr;
    if (p == nullptr || !p->call.bind(r->pool)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    p->base.data = static_cast<u_char*>(ngx_pnalloc(r->pool, piece_base_size(key)));
    p->buf = static_cast<ngx_buf_t*>(ngx_calloc_buf(r->pool));
    if (p->base.data == nullptr || p->buf == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    p->base.len = write_piece_base(key, record->pieces.id, reinterpret_cast<char*>(p->base.data));
    p->r = r;
    p->ctx = ctx;
    p->record = record;
    p->store = ctx->claim.store != nullptr ? ctx->claim.store : store_for(*ctx->conf);
    p->call.init(on_timeout, p, r->connection->log);
    ctx->pieces = p;
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: replaying \"%V\" from %uD pieces, %uL body bytes", &ctx->claim.key,
                   record->pieces.count, record->pieces.body_size);
    // a client that leaves is noticed while the store is asked
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;
    if (p->store == nullptr
        || !p->call.await(p->store, p->store->pieces_look(view(p->base), record->pieces.count, on_look, p),
                          ctx->conf->redis_timeout)) {
        ctx->outcome = Outcome::unavailable;
        answer_problem(r, outcome_info(Outcome::unavailable));
    }
    return NGX_DONE;
}

}  // namespace idem
