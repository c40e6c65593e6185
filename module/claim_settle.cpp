// claim_settle.cpp — the held claim settled: released, completed with the
// record (compressed, sealed, the marker beside it), or marked unreplayable;
// its waiters look at once. Must not touch the claim before it is held
// (claim.cpp) nor the response (capture.cpp). See docs/design.md#how-it-works.

#include <cstdlib>

#include "claim.hpp"
#include "compression.hpp"
#include "conf_util.hpp"
#include "metrics.hpp"
#include "request_ctx.hpp"
#include "seal.hpp"
#include "wait.hpp"

namespace idem {
namespace {

void settled(RequestCtx* ctx)
{
    enter(ctx, client_left(ctx) ? RequestState::drained : RequestState::settled);
}

}  // namespace

void claim_release(RequestCtx* ctx, const char* why) noexcept
{
    ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0, "idempotency: releasing \"%V\": %s",
                  &ctx->claim.key, why);
    ctx->claim.store->release(view(ctx->claim.key), view(ctx->claim.record), ctx->conf->lock_ttl);
    settled(ctx);
    ctx->outcome = Outcome::released;
    wake_waiters(ctx);
}

namespace {

// Before it is sealed; else the record as it was.
RecordBytes compressed(RecordBytes record, const Dictionaries& dictionaries, ngx_log_t* log) noexcept
{
    RecordCompressor& compressor = worker_compressor();
    std::string_view plain = record.view();
    if (plain.size() < min_compressed(dictionaries.first())) {
        return record;
    }
    auto* out = static_cast<char*>(ngx_alloc(RecordCompressor::bound(plain.size()), log));
    std::size_t size = out != nullptr ? compressor.compress(plain, out, dictionaries.first()) : 0;
    if (size == 0) {
        ngx_free(out);
        return record;
    }
    // a store may keep it a while (until it lands): its own size, not the bound
    if (auto* fitted = static_cast<char*>(std::realloc(out, size))) {  // ngx_alloc is malloc
        out = fitted;
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: the record compressed from %uz to %uz bytes",
                   plain.size(), size);
    count(Counter::compressed_records);
    count(Counter::compression_saved_bytes, plain.size() - size);
    return RecordBytes::owned(out, {out, size});  // the plain record freed with `record`
}

}  // namespace

// The sealed copy is ngx_alloc'd, not from r->pool: a response that never
// completed is settled from the pool's cleanup, after nginx let go of r->pool.
// The marker goes with the record, sealed alike, for a store that cannot
// hold the record while Redis refuses it for memory.
void claim_complete(RequestCtx* ctx, RecordBytes record, StoreNotice notice) noexcept
{
    ngx_array_t* keys = ctx->conf->seal_keys;
    ngx_log_t* log = ctx->request->connection->log;
    RecordBytes value = ctx->conf->compress ? compressed(std::move(record), location_dictionaries(*ctx->conf), log)
                                            : std::move(record);
    char marker[unreplayable_size];
    std::string_view fallback{
        marker, encode_unreplayable(ctx->fingerprint, static_cast<std::uint16_t>(ctx->response_status), marker)};
    char sealed_marker[unreplayable_size + seal_overhead];
    if (keys != nullptr) {
        if (seal(static_cast<SecretKey*>(keys->elts)[0], view(ctx->claim.key), fallback, sealed_marker)) {
            fallback = {sealed_marker, fallback.size() + seal_overhead};
        }
        std::string_view plain = value.view();
        auto* sealed = static_cast<char*>(ngx_alloc(plain.size() + seal_overhead, log));
        if (sealed != nullptr && seal(static_cast<SecretKey*>(keys->elts)[0], view(ctx->claim.key), plain, sealed)) {
            value = RecordBytes::owned(sealed, {sealed, plain.size() + seal_overhead});  // the plain record freed
        } else {
            // Never let the claim lapse into a second execution: store the
            // plain marker (a fingerprint and a status, nothing of the
            // response); with encryption on it reads as unverifiable (410).
            ngx_free(sealed);
            ngx_log_error(NGX_LOG_ALERT, log, 0, "idempotency: cannot encrypt the record for \"%V\"", &ctx->claim.key);
            value = RecordBytes::borrowed({marker, unreplayable_size});
            fallback = value.view();
            notice.tell(StoreOutcome::not_stored);
            notice = {};
        }
    }
    size_t size = value.view().size();
    bool within_lease = ctx->claim.lease != nullptr && ctx->claim.lease->holds(ngx_current_msec);
    std::uint64_t ttl = ctx->capture.ttl_ms != 0 ? ctx->capture.ttl_ms : ctx->conf->ttl;
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "idempotency: storing %uz bytes under \"%V\" for %uL ms, %s", size, &ctx->claim.key,
                   ttl, within_lease ? "within the claim's lease so far" : "fenced");
    ctx->claim.store->complete(view(ctx->claim.key), view(ctx->claim.record), std::move(value), fallback, ttl,
                               ctx->conf->lock_ttl, within_lease ? ctx->claim.lease : nullptr, notice);
    count(Counter::stored_responses);
    count(Counter::stored_bytes, size);
    settled(ctx);
    wake_waiters(ctx);
}

// A response that breaks HTTP is the upstream's fault: an error; limits: a warning.
void claim_unreplayable(RequestCtx* ctx, const char* why, MarkerWhy said) noexcept
{
    char marker[unreplayable_why_size];
    size_t size = encode_unreplayable(ctx->fingerprint, static_cast<std::uint16_t>(ctx->response_status), said, marker);
    ngx_uint_t level = said != MarkerWhy::unsaid ? NGX_LOG_ERR : NGX_LOG_WARN;
    ngx_log_error(level, ctx->request->connection->log, 0, "idempotency: the response to \"%V\" cannot be replayed: %s",
                  &ctx->claim.key, why);
    claim_complete(ctx, RecordBytes::borrowed({marker, size}));
}

}  // namespace idem
