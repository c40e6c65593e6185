// store.cpp — see store.hpp: what the stores share, the backends apart.

#include "store.hpp"

#include "compression.hpp"
#include "decide.hpp"
#include "live_board.hpp"

namespace idem {

RecordInflater& worker_inflater() noexcept
{
    static RecordInflater inflater;
    return inflater;
}

RecordCompressor& worker_compressor() noexcept
{
    static RecordCompressor compressor(record_compression_level);
    return compressor;
}

void ClaimWaiter::answer(Outcome outcome) const noexcept
{
    callback(data, {outcome, nullptr, {}});
}

void ClaimWaiter::granted(std::uint64_t drawn) const noexcept
{
    ClaimResult result{Outcome::fresh, nullptr, {}};
    result.fence = drawn;
    callback(data, result);
}

void ClaimWaiter::answer_found(std::string_view key, RecordBytes found, ngx_log_t* log) const noexcept
{
    std::string_view value = found.view();
    char* room = nullptr;
    RecordBytes opened;  // a sealed record, opened: the request may keep that instead
    if (is_sealed(value)) {  // only a sealed record needs room to open into
        room = static_cast<char*>(ngx_alloc(value.size(), log));
        if (room == nullptr) {
            answer(Outcome::unavailable);
            return;
        }
        opened = RecordBytes::owned(room, {});
    }
    Record record;
    Unusable why = Unusable::no;
    Outcome outcome = decide_at_rest(key, value, keys, key_count, fingerprint, room, record, why);
    if (why == Unusable::compressed) {
        // opened into a block of its own, which the request may keep; the
        // sealed form's room (if any) is freed with `opened`
        std::size_t max_plain = limits.max_plain();
        std::optional<CompressedHead> head = compressed_head(value);
        std::size_t size = head && head->plain_size <= max_plain ? head->plain_size : 0;
        char* plain = size != 0 ? static_cast<char*>(ngx_alloc(size, log)) : nullptr;
        if (size != 0 && plain == nullptr) {
            answer(Outcome::unavailable);
            return;
        }
        outcome = decide_inflated(value, worker_inflater(), dictionaries, max_plain, plain, fingerprint, record, why);
        if (plain != nullptr && value.data() == plain) {
            opened = RecordBytes::owned(plain, {});
            room = plain;
        } else {
            ngx_free(plain);  // not opened: `value` still views what was found
        }
    }
    outcome = decide_limits(outcome, record, limits, why);
    if (why == Unusable::not_a_record) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "idempotency: the value under \"%*s\" is not a record of this module",
                      key.size(), key.data());
    } else if (why != Unusable::no) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "idempotency: the record under \"%*s\" does not open: %s", key.size(),
                      key.data(), unusable_reason(why));
    }
    RecordBytes* bytes = &found;  // what `value` views
    if (room != nullptr && value.data() == room) {
        opened = RecordBytes::owned(opened.release(), value);
        bytes = &opened;
    }
    bool decoded = outcome == Outcome::replayed || outcome == Outcome::unreplayable;
    callback(data, {outcome, decoded ? &record : nullptr, value, bytes});
}

void store_settled(std::string_view key) noexcept
{
    live_board_settled(live_board_slot(key));
}

PendingOp* new_pending(ClaimStore* store, std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                       const ClaimWaiter& waiter, ngx_log_t* log) noexcept
{
    const std::string_view args[] = {key, claim};
    auto* op = new_with_args<PendingOp>(args, 2, log);
    if (op != nullptr) {
        op->store = store;
        op->waiter = waiter;
        op->lock_ttl_ms = lock_ttl_ms;
    }
    return op;
}

LiveOp* new_live_op(LiveStore* store, std::string_view key, std::string_view bytes, LiveCallback callback, void* data,
                    ngx_log_t* log) noexcept
{
    const std::string_view args[] = {key, bytes};
    auto* op = new_with_args<LiveOp>(args, 2, log);
    if (op != nullptr) {
        op->store = store;
        op->callback = callback;
        op->data = data;
    }
    return op;
}

PeekOp* new_peek_op(OperatorStore* store, std::string_view key, std::string_view expected, bool purge,
                    PeekCallback callback, void* data, ngx_log_t* log) noexcept
{
    const std::string_view args[] = {key, expected};
    auto* op = new_with_args<PeekOp>(args, 2, log);
    if (op != nullptr) {
        op->store = store;
        op->callback = callback;
        op->data = data;
        op->purge = purge;
    }
    return op;
}

Lease* new_lease(std::uint64_t end, ngx_log_t* log) noexcept
{
    auto* lease = static_cast<Lease*>(ngx_alloc(sizeof(Lease), log));
    if (lease != nullptr) {
        *lease = Lease{end, 1, false};
    }
    return lease;
}

void drop_lease(Lease* lease) noexcept
{
    if (lease != nullptr && --lease->refs == 0) {
        ngx_free(lease);
    }
}

}  // namespace idem
