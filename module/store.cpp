// store.cpp — see store.hpp: what the stores share.

#include "store.hpp"

#include "decide.hpp"

namespace idem {

void ClaimWaiter::answer(Outcome outcome) const noexcept
{
    callback(data, {outcome, nullptr, {}});
}

void ClaimWaiter::answer_found(std::string_view key, std::string_view found, ngx_log_t* log,
                               char** take) const noexcept
{
    char* opened = nullptr;
    if (is_sealed(found)) {  // only a sealed record needs room to open into
        opened = static_cast<char*>(ngx_alloc(found.size(), log));
        if (opened == nullptr) {
            answer(Outcome::unavailable);
            return;
        }
    }
    Record record;
    Unusable why = Unusable::no;
    Outcome outcome = decide_at_rest(key, found, keys, key_count, fingerprint, opened, record, why);
    if (why == Unusable::not_a_record) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "idempotency: the value under \"%*s\" is not a record of this module",
                      key.size(), key.data());
    } else if (why != Unusable::no) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "idempotency: the record under \"%*s\" does not open: %s", key.size(),
                      key.data(), unusable_reason(why));
    }
    if (opened != nullptr) {
        take = found.data() == opened ? &opened : nullptr;  // else it did not open
    }
    callback(data, {outcome, outcome == Outcome::replayed ? &record : nullptr, found, take});
    ngx_free(opened);
}

PendingOp* new_pending(Store* store, std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
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
