// piece_writer.cpp — see piece_writer.hpp. Each piece is written as a
// live log is made (Store::live_append at 0: `SET key value PX ttl NX` on
// Redis), compressed when that pays (idempotency_compress), sealed bound
// to its key (idempotency_encrypt_key). The writer keeps copies of what it
// needs of the request (the store key, the keys' base), so that it can
// follow the pieces' answers after the request is gone.

#include "piece_writer.hpp"

#include <cstring>
#include <new>

#include "big_endian.hpp"
#include "compression.hpp"
#include "log_limit.hpp"
#include "pieces.hpp"
#include "request_ctx.hpp"
#include "seal.hpp"

namespace idem {

// Pieces outlive their record by this much: written before it, they must
// not expire before it does, however long the response took.
constexpr std::uint64_t piece_ttl_margin_ms = 60 * 60 * 1000;

struct PieceWriter {
    Store* store;
    const SecretKey* seal_key;  // nullptr: not sealed
    bool compress;
    bool failed;       // a piece did not land, or could not be written
    bool done;         // pieces_done: the capture let go
    bool kept;         // ... with the record stored
    std::uint32_t written;
    std::uint32_t pending;   // pieces the store has not answered yet
    std::uint32_t max_count;
    std::uint32_t piece_size;
    std::uint64_t piece_ttl_ms;  // the record's life and a margin
    char id[pieces_id_size];
    char* sizes;             // max_count big-endian 32-bit stored sizes
    ngx_str_t key;           // the store key
    ngx_str_t base;          // the pieces' keys' base
};

namespace {

LogLimiter refused_log;

void free_writer(PieceWriter* w)
{
    w->~PieceWriter();
    ngx_free(w);
}

// The key of piece `index`, in `out` (room for base + piece_index_digits).
std::string_view piece_key(const PieceWriter* w, std::uint32_t index, char* out)
{
    return {out, write_piece_key(view(w->base), index, out)};
}

void delete_pieces(PieceWriter* w)
{
    char key[max_piece_key_size];
    for (std::uint32_t i = 0; i < w->written; i++) {
        w->store->live_expire(piece_key(w, i, key), 0);
    }
}

// Every piece answered and the capture done: the writer goes, and the
// pieces with it unless they are kept whole.
void settle(PieceWriter* w)
{
    if (w->pending != 0 || !w->done) {
        return;
    }
    if (w->kept && w->failed) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "idempotency: a piece of the response to \"%V\" was not stored: its retries get 410", &w->key);
    }
    if (!w->kept || w->failed) {
        delete_pieces(w);
    } else {
        // the record has landed by now: its pieces outlive it from here
        char key[max_piece_key_size];
        for (std::uint32_t i = 0; i < w->written; i++) {
            w->store->live_expire(piece_key(w, i, key), w->piece_ttl_ms);
        }
    }
    free_writer(w);
}

void on_piece(void* data, LiveStatus status, std::string_view)
{
    auto* w = static_cast<PieceWriter*>(data);
    w->pending--;
    if (status != LiveStatus::done) {
        if (!w->failed && refused_log.admit()) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "idempotency: the store did not keep a piece of the response to \"%V\" (%s; %ui since the "
                          "last line)",
                          &w->key, status == LiveStatus::gone ? "a piece of that name was there" : "refused",
                          refused_log.take());
        }
        w->failed = true;
    }
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

PieceWriter* pieces_begin(RequestCtx* ctx) noexcept
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
    w->piece_ttl_ms = ttl + piece_ttl_margin_ms;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: the response to \"%V\" is kept in pieces of %uz bytes",
                   &ctx->claim.key, piece_size);
    return w;
}

bool pieces_put(PieceWriter* w, std::string_view body) noexcept
{
    if (w->failed || w->written == w->max_count) {
        w->failed = true;
        return false;
    }
    std::uint32_t index = w->written;
    // the piece: its head, then the body bytes or their zstd frame
    std::size_t bound = piece_head_size + (w->compress ? RecordCompressor::frame_bound(body.size()) : body.size());
    auto* plain = static_cast<char*>(ngx_alloc(ngx_max(bound, piece_head_size + body.size()), ngx_cycle->log));
    if (plain == nullptr) {
        w->failed = true;
        return false;
    }
    std::size_t packed = w->compress ? worker_compressor().compress_frame(body, plain + piece_head_size,
                                                                         bound - piece_head_size)
                                     : 0;
    bool zstd = packed != 0 && compression_pays(body.size(), packed);
    encode_piece_head(plain, {w->id, pieces_id_size}, index, zstd ? piece_form_zstd : piece_form_plain);
    if (!zstd) {
        std::memcpy(plain + piece_head_size, body.data(), body.size());
    }
    std::string_view value{plain, piece_head_size + (zstd ? packed : body.size())};
    char key[max_piece_key_size];
    std::string_view name = piece_key(w, index, key);
    char* sealed = nullptr;
    if (w->seal_key != nullptr) {
        sealed = static_cast<char*>(ngx_alloc(value.size() + seal_overhead, ngx_cycle->log));
        if (sealed == nullptr || !seal(*w->seal_key, name, value, sealed)) {
            ngx_free(sealed);
            ngx_free(plain);
            w->failed = true;
            return false;
        }
        value = {sealed, value.size() + seal_overhead};
    }
    put_be<std::uint32_t>(w->sizes + 4 * index, static_cast<std::uint32_t>(value.size()));
    LiveOp* op = w->store->live_append(name, 0, value, w->piece_ttl_ms, on_piece, w);
    ngx_free(sealed);
    ngx_free(plain);
    if (op == nullptr) {
        w->failed = true;
        return false;
    }
    w->written++;
    w->pending++;
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

void pieces_done(PieceWriter* w, bool keep) noexcept
{
    w->done = true;
    w->kept = keep;
    settle(w);
}

}  // namespace idem
