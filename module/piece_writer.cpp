// piece_writer.cpp — see piece_writer.hpp. Each piece is written like a live
// log at 0 (`SET key value PX ttl NX` on Redis), compressed when that pays,
// sealed bound to its key. The writer copies what it needs of the request so
// it can follow answers after the request is gone, and keeps the piece's
// bytes until it lands to send them again after LiveStatus::lost. A piece
// sent again that finds itself there landed before: its name (the claim
// token's id) is this request's alone.

#include "piece_writer.hpp"

#include <cstring>
#include <new>

#include "big_endian.hpp"
#include "compression.hpp"
#include "log_limit.hpp"
#include "pieces.hpp"
#include "redis/retry.hpp"
#include "request_ctx.hpp"
#include "seal.hpp"

namespace idem {

// While the response is captured, a piece outlives its record's ttl by an
// hour: the record is written last, however long the response takes.
constexpr std::uint64_t capture_margin_ms = 60 * 60 * 1000;
// Once the record landed, its pieces expire this long after it
// (docs/design.md#large-responses-in-pieces): the expire runs on the store
// after the record's write, so they outlive it, and a replay that began in
// the record's last moments has a minute, nginx's send_timeout, to take them.
constexpr std::uint64_t settled_margin_ms = 60 * 1000;

enum class WriterState : std::uint8_t {
    capturing,  // the capture puts pieces
    dropping,   // let go, the response not kept: the pieces go once the store has answered them
    keeping,    // let go with the record sent: the pieces stay or go by what became of it
};

// At most one at the store.
enum class PieceAt : std::uint8_t {
    none,     // the next may go
    written,  // sent, its answer awaited
    again,    // failed for now: sent again when the retry timer fires
};

struct PieceWriter {
    LiveStore* store;
    const SecretKey* seal_key;  // nullptr: not sealed
    bool compress;
    bool failed;       // a piece did not land, or could not be written
    WriterState state;
    PieceAt at;
    bool record_told;      // the record's outcome is known (keeping)
    StoreOutcome record;   // ... and what it is
    std::uint32_t written;   // pieces given an index, the one at the store included
    std::uint32_t max_count;
    std::uint32_t piece_size;
    std::uint64_t ttl_ms;        // the record's life
    std::uint64_t lock_ttl_ms;   // the claim's: how long a piece is tried again
    void (*answered)(void* data);  // the capture's, until pieces_done
    void* answered_data;
    redis::Retry retry;      // the attempts of the piece at the store, after its first failure
    ngx_event_t retry_timer;
    char* value;             // the piece at the store, kept to be sent again
    std::size_t value_size;
    std::size_t value_room;
    char id[pieces_id_size];
    char* sizes;             // max_count big-endian 32-bit stored sizes
    ngx_str_t key;           // the store key
    ngx_str_t base;          // the pieces' keys' base
};

namespace {

LogLimiter refused_log;
LogLimiter again_log;

void free_writer(PieceWriter* w)
{
    if (w->retry_timer.timer_set) {
        ngx_del_timer(&w->retry_timer);
    }
    ngx_free(w->value);
    w->~PieceWriter();
    ngx_free(w);
}

std::string_view piece_key(const PieceWriter* w, std::uint32_t index, char* out)
{
    return {out, write_piece_key(view(w->base), index, out)};
}

// The pieces are kept (expiry pushed out past the record's) or deleted;
// when the store cannot say what became of the record, left to expire.
void settle(PieceWriter* w)
{
    if (w->state == WriterState::capturing || w->at != PieceAt::none) {
        return;
    }
    if (w->state == WriterState::keeping && !w->record_told) {
        // the record's outcome may take long (a store Redis refused for
        // memory waits for room): no piece is held meanwhile
        ngx_free(w->value);
        w->value = nullptr;
        return;
    }
    bool keep = w->state == WriterState::keeping && w->record == StoreOutcome::stored;
    bool drop = w->state == WriterState::dropping || w->record == StoreOutcome::not_stored;
    if (w->state == WriterState::keeping && drop) {
        ngx_log_error(NGX_LOG_INFO, ngx_cycle->log, 0,
                      "idempotency: the record of the response to \"%V\" was not stored: its %uD pieces are deleted",
                      &w->key, w->written);
    }
    if (keep || drop) {
        char key[max_piece_key_size];
        for (std::uint32_t i = 0; i < w->written; i++) {
            w->store->live_expire(piece_key(w, i, key), keep ? w->ttl_ms + settled_margin_ms : 0);
        }
    }
    free_writer(w);
}

// Landed, or failed for good.
void piece_answered(PieceWriter* w)
{
    w->at = PieceAt::none;
    w->retry = {};
    if (w->state == WriterState::capturing) {
        w->answered(w->answered_data);
        return;
    }
    settle(w);
}

void send(PieceWriter* w);

// False when its window is over.
bool again_later(PieceWriter* w, const char* why)
{
    std::uint64_t wait = 0;
    bool first = w->retry.failures == 0;
    // the claim's life: the request renews it meanwhile, and once the store
    // has been out of reach that long the claim may be gone
    std::uint64_t window = w->lock_ttl_ms;
    if (!w->retry.next(ngx_current_msec, window, redis::retry_max_delay_ms, wait)) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "idempotency: gave up writing piece %uD of the response to \"%V\" after %uD attempts in %M ms "
                      "(%s): the response is not kept, its retries get 410",
                      w->written - 1, &w->key, w->retry.failures,
                      static_cast<ngx_msec_t>(ngx_current_msec - w->retry.started), why);
        return false;
    }
    if (first && again_log.admit()) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: cannot write piece %uD of the response to \"%V\" now (%s); trying again for up "
                      "to %M ms, the response held back meanwhile (%ui since the last line)",
                      w->written - 1, &w->key, why, static_cast<ngx_msec_t>(window), again_log.take());
    }
    w->at = PieceAt::again;
    ngx_add_timer(&w->retry_timer, static_cast<ngx_msec_t>(wait));
    return true;
}

void failed_for_good(PieceWriter* w, LiveStatus status)
{
    if (!w->failed && refused_log.admit()) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "idempotency: the store did not keep a piece of the response to \"%V\" (%s; %ui since the "
                      "last line)",
                      &w->key, status == LiveStatus::gone ? "a piece of that name was there" : "refused",
                      refused_log.take());
    }
    w->failed = true;
}

void on_piece(void* data, LiveStatus status, std::string_view)
{
    auto* w = static_cast<PieceWriter*>(data);
    // sent again, it finds itself there when an earlier attempt landed
    bool landed = status == LiveStatus::done || (status == LiveStatus::gone && w->retry.failures > 0);
    if (landed && w->retry.failures > 0) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: attempt %uD to write piece %uD of the response to \"%V\" succeeded",
                      w->retry.failures + 1, w->written - 1, &w->key);
    }
    // (a response no longer captured is not kept: its pieces go anyway)
    if (!landed && w->state == WriterState::capturing) {
        if (status == LiveStatus::lost && again_later(w, "no answer, or not now")) {
            return;
        }
        failed_for_good(w, status);
    }
    piece_answered(w);
}

void on_retry_timer(ngx_event_t* ev)
{
    send(static_cast<PieceWriter*>(ev->data));
}

void send(PieceWriter* w)
{
    char key[max_piece_key_size];
    std::string_view name = piece_key(w, w->written - 1, key);
    w->at = PieceAt::written;
    if (w->store->live_append(name, 0, {w->value, w->value_size}, w->ttl_ms + capture_margin_ms, on_piece, w, LiveKind::piece)
        != nullptr) {
        return;
    }
    if (again_later(w, "the store cannot be reached")) {
        return;
    }
    failed_for_good(w, LiveStatus::failed);
    piece_answered(w);
}

void on_record(void* data, StoreOutcome outcome)
{
    auto* w = static_cast<PieceWriter*>(data);
    w->record_told = true;
    w->record = outcome;
    settle(w);
}

void copy(ngx_str_t& to, std::string_view from, char*& room)
{
    to.data = reinterpret_cast<u_char*>(room);
    to.len = from.size();
    std::memcpy(room, from.data(), from.size());
    room += from.size();
}

}  // namespace

PieceWriter* pieces_begin(RequestCtx* ctx, void (*answered)(void* data), void* data) noexcept
{
    ngx_log_t* log = ctx->request->connection->log;
    std::optional<Record> claim = decode_record(view(ctx->claim.record));
    if (!claim || claim->token.size() < pieces_id_size) {
        return nullptr;
    }
    std::string_view key = view(ctx->claim.key);
    std::size_t piece_size = piece_body_size(ctx->conf->piece_size);
    std::size_t max_count = (ctx->conf->max_response_size + piece_size - 1) / piece_size;
    std::size_t base_size = piece_base_size(key);
    std::size_t extra = key.size() + base_size + 4 * max_count;
    auto* w = static_cast<PieceWriter*>(ngx_alloc(sizeof(PieceWriter) + extra, log));
    if (w == nullptr) {
        return nullptr;
    }
    new (w) PieceWriter{};
    w->value_room = piece_head_size + ngx_max(RecordCompressor::frame_bound(piece_size), piece_size) + seal_overhead;
    w->value = static_cast<char*>(ngx_alloc(w->value_room, log));
    if (w->value == nullptr) {
        free_writer(w);
        return nullptr;
    }
    char* room = reinterpret_cast<char*>(w + 1);
    copy(w->key, key, room);
    std::memcpy(w->id, claim->token.data(), pieces_id_size);
    w->base.data = reinterpret_cast<u_char*>(room);
    w->base.len = write_piece_base(key, {w->id, pieces_id_size}, room);
    room += base_size;
    w->sizes = room;
    w->store = ctx->claim.store;
    ngx_array_t* keys = ctx->conf->seal_keys;
    w->seal_key = keys != nullptr ? static_cast<const SecretKey*>(keys->elts) : nullptr;
    w->compress = ctx->conf->compress;
    w->max_count = static_cast<std::uint32_t>(max_count);
    w->piece_size = static_cast<std::uint32_t>(piece_size);
    std::uint64_t ttl = ctx->capture.ttl_ms != 0 ? ctx->capture.ttl_ms : ctx->conf->ttl;
    w->ttl_ms = ttl;
    w->lock_ttl_ms = ctx->conf->lock_ttl;
    w->answered = answered;
    w->answered_data = data;
    // the capture waits for it (its request held back): it keeps an exiting worker alive
    set_event(w->retry_timer, on_retry_timer, w, ngx_cycle->log);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: the response to \"%V\" is kept in pieces of %uz bytes",
                   &ctx->claim.key, piece_size);
    return w;
}

bool pieces_busy(const PieceWriter* w) noexcept
{
    return w->at != PieceAt::none;
}

bool pieces_put(PieceWriter* w, std::string_view body) noexcept
{
    if (w->failed || w->written == w->max_count || w->at != PieceAt::none || body.size() > w->piece_size) {
        w->failed = true;
        return false;
    }
    std::uint32_t index = w->written;
    // sealed, it is made apart first
    std::size_t bound = piece_head_size + (w->compress ? RecordCompressor::frame_bound(body.size()) : body.size());
    char* plain = w->value;
    if (w->seal_key != nullptr) {
        plain = static_cast<char*>(ngx_alloc(ngx_max(bound, piece_head_size + body.size()), ngx_cycle->log));
        if (plain == nullptr) {
            w->failed = true;
            return false;
        }
    }
    std::size_t packed = w->compress ? worker_compressor().compress_frame(body, plain + piece_head_size,
                                                                         bound - piece_head_size)
                                     : 0;
    bool zstd = packed != 0 && compression_pays(body.size(), packed);
    encode_piece_head(plain, {w->id, pieces_id_size}, index, zstd ? piece_form_zstd : piece_form_plain);
    if (!zstd) {
        std::memcpy(plain + piece_head_size, body.data(), body.size());
    }
    w->value_size = piece_head_size + (zstd ? packed : body.size());
    if (w->seal_key != nullptr) {
        char key[max_piece_key_size];
        bool sealed = seal(*w->seal_key, piece_key(w, index, key), {plain, w->value_size}, w->value);
        ngx_free(plain);
        if (!sealed) {
            w->failed = true;
            return false;
        }
        w->value_size += seal_overhead;
    }
    put_be<std::uint32_t>(w->sizes + 4 * index, static_cast<std::uint32_t>(w->value_size));
    w->written++;
    send(w);
    return !w->failed;
}

PieceList pieces_list(const PieceWriter* w, std::uint64_t body_size) noexcept
{
    PieceList list;
    list.id = {w->id, pieces_id_size};
    list.count = w->written;
    list.size = w->piece_size;
    list.body_size = body_size;
    list.stored_sizes = {w->sizes, std::size_t{4} * w->written};
    return list;
}

bool pieces_failed(const PieceWriter* w) noexcept
{
    return w->failed;
}

StoreNotice pieces_record_notice(PieceWriter* w) noexcept
{
    return StoreNotice{on_record, w};
}

void pieces_done(PieceWriter* w, bool keep) noexcept
{
    w->answered = nullptr;
    w->state = keep ? WriterState::keeping : WriterState::dropping;
    if (!keep && w->at == PieceAt::again) {
        // not sent again: it may have landed, and goes with the others
        ngx_del_timer(&w->retry_timer);
        w->at = PieceAt::none;
    }
    settle(w);
}

}  // namespace idem
