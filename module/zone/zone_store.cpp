// zone/zone_store.cpp — see zone_store.hpp: claims and records, shaped like
// limit_req's zones: the mutex held only for one operation's short work.

#include "zone_store.hpp"

#include <cstring>
#include <utility>

#include "../log_limit.hpp"
#include "../metrics.hpp"
#include "zone_rules.hpp"

namespace idem::zone {
namespace {

constexpr size_t expire_per_claim = 2;  // expired records freed on every claim

LogLimiter full_claim_log, full_store_log;

}  // namespace

PendingOp* ZoneStore::claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                            const ClaimWaiter& waiter) noexcept
{
    PendingOp* op = new_pending(this, key, claim, lock_ttl_ms, waiter, ngx_cycle->log);
    if (op == nullptr) {
        return nullptr;
    }
    set_event(op->event, on_claim_event, op, ngx_cycle->log);
    ngx_post_event(&op->event, &ngx_posted_events);
    return op;
}

void ZoneStore::abandon(PendingOp* op) noexcept
{
    // Not run yet, so nothing was claimed.
    if (op->event.posted) {
        ngx_delete_posted_event(&op->event);
    }
    ngx_free(op);
}

// Under the mutex the fence costs nothing: no lease needed. A store is never
// held for later: a full zone's marker is made from the claim, in its room.
void ZoneStore::complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view,
                         std::uint64_t ttl_ms, std::uint64_t, Lease*, StoreNotice notice) noexcept
{
    Stored outcome = store(key, claim, record.view(), ttl_ms);
    notice.tell(outcome == Stored::stored || outcome == Stored::done ? StoreOutcome::stored
                                                                     : StoreOutcome::not_stored);
}

Stored ZoneStore::store(std::string_view key, std::string_view claim, std::string_view record,
                        std::uint64_t ttl_ms) noexcept
{
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::store);
    ngx_msec_t now = ngx_current_msec;
    Node* n = find_live(key, hash, now);
    Stored outcome = Stored::refused;
    switch (fence_complete(n ? std::optional(value_of(n)) : std::nullopt, claim, record)) {
    case Fence::done:
        outcome = Stored::done;
        break;
    case Fence::refused:
        break;
    case Fence::act:
        outcome = replace(n, key, hash, claim, record, now, now + ttl_ms);
        break;
    }
    unlock(Section::store);
    store_settled(key);  // done under the lock: the waiters of every worker find it now

    if (outcome == Stored::refused) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: could not store the response: the claim had expired or was taken over");
    } else if (outcome == Stored::marker || outcome == Stored::kept) {
        count(Counter::zone_full_stores);
        if (full_store_log.admit()) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "idempotency: zone \"%V\" is full: the response to \"%*s\" is not stored, its retries "
                          "get %s (%ui since the last line)",
                          &shm_->shm.name, key.size(), key.data(), outcome == Stored::marker ? "410" : "409",
                          full_store_log.take());
        }
    }
    return outcome;
}

void ZoneStore::release(std::string_view key, std::string_view claim, std::uint64_t) noexcept
{
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::release);
    Node* n = find_live(key, hash, ngx_current_msec);
    Fence f = fence_release(n ? std::optional(value_of(n)) : std::nullopt, claim);
    if (f == Fence::act) {
        remove(n);
    }
    unlock(Section::release);
    store_settled(key);
    if (f == Fence::refused) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: could not release the key: the claim had expired or was taken over");
    }
}

void ZoneStore::renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                      Lease* lease) noexcept
{
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::renew);
    ngx_msec_t now = ngx_current_msec;
    Node* n = find_live(key, hash, now);
    Fence f = fence_renew(n ? std::optional(value_of(n)) : std::nullopt, claim);
    if (f == Fence::act) {
        expire_at(n, now + lock_ttl_ms);
    }
    unlock(Section::renew);
    if (f == Fence::refused) {
        if (lease != nullptr) {
            lease->revoke();  // unused by this store, but true
        }
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: could not renew the claim: the claim had expired or was taken over");
    }
}

// Without room for the record, the claim becomes the marker (it fits where
// the claim was): the response executed and must never run again.
Stored ZoneStore::replace(Node* n, std::string_view key, ngx_rbtree_key_t hash, std::string_view claim,
                          std::string_view record, ngx_msec_t now, ngx_msec_t expires) noexcept
{
    if (record.size() <= n->capacity) {
        set_value(n, record);
        expire_at(n, expires);
        return Stored::stored;
    }
    // For a moment both are in the tree; removing the claim leaves the record.
    if (insert(key, hash, record, now, expires) != nullptr) {
        remove(n);
        return Stored::stored;
    }
    char marker[unreplayable_size];
    size_t size = full_zone_marker(claim, record, marker);
    if (size != 0 && size <= n->capacity) {
        set_value(n, {marker, size});
        expire_at(n, expires);
        return Stored::marker;
    }
    expire_at(n, expires);  // the claim stays: 409 rather than a second execution
    return Stored::kept;
}

// Else copies out the record found (ngx_alloc'd, owned by `found`). A
// granted claim's fence is the clock in µs, or the zone's last fence + 1 if
// that is not less (docs/design.md#the-fence).
Claimed ZoneStore::take(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                        RecordBytes& found, std::uint64_t* fence) noexcept
{
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::claim);
    ngx_msec_t now = ngx_current_msec;
    expire(expire_per_claim, now);
    Claimed result = Claimed::granted;
    if (Node* n = find_live(key, hash, now)) {
        auto* copy = static_cast<char*>(ngx_alloc(n->value_len, ngx_cycle->log));
        if (copy == nullptr) {
            result = Claimed::no_memory;
        } else {
            std::memcpy(copy, value_of(n).data(), n->value_len);
            found = RecordBytes::owned(copy, {copy, n->value_len});
            result = Claimed::found;
        }
    } else if (insert(key, hash, claim, now, now + lock_ttl_ms) == nullptr) {
        result = Claimed::full;
    } else if (fence != nullptr) {
        ngx_time_t* tp = ngx_timeofday();
        std::uint64_t clock = static_cast<std::uint64_t>(tp->sec) * 1000000 + tp->msec * 1000;
        sh_->last_fence = clock > sh_->last_fence ? clock : sh_->last_fence + 1;
        *fence = sh_->last_fence;
    }
    unlock(result == Claimed::granted || result == Claimed::full ? Section::claim : Section::found);
    return result;
}

void ZoneStore::on_claim_event(ngx_event_t* ev)
{
    auto* op = static_cast<PendingOp*>(ev->data);
    auto* self = static_cast<ZoneStore*>(op->store);
    RecordBytes found;
    std::uint64_t fence = 0;

    switch (self->take(op->key(), op->claim(), op->lock_ttl_ms, found, op->waiter.fence ? &fence : nullptr)) {
    case Claimed::granted:
        op->waiter.granted(fence);
        break;
    case Claimed::full:
        count(Counter::zone_full_claims);
        if (full_claim_log.admit()) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "idempotency: zone \"%V\" is full: claims refused, requests follow "
                          "idempotency_fail_open (%ui since the last line)",
                          &self->shm_->shm.name, full_claim_log.take());
        }
        op->waiter.answer(Outcome::unavailable);
        break;
    case Claimed::no_memory:
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "idempotency: out of memory reading zone \"%V\"",
                      &self->shm_->shm.name);
        op->waiter.answer(Outcome::unavailable);
        break;
    case Claimed::found:
        op->waiter.answer_found(op->key(), std::move(found), ngx_cycle->log);  // the request may keep it
        break;
    }
    ngx_free(op);
}

}  // namespace idem::zone
