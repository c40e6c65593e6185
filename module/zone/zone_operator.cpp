// zone/zone_operator.cpp — see zone_store.hpp: the operator's plane,
// under the mutex on the next event-loop turn.

#include "zone_store.hpp"

#include <cstring>

namespace idem::zone {

PeekOp* ZoneStore::peek(std::string_view key, PeekCallback callback, void* data) noexcept
{
    return post_peek(new_peek_op(this, key, {}, false, callback, data, ngx_cycle->log));
}

PeekOp* ZoneStore::purge(std::string_view key, std::string_view expected, PeekCallback callback,
                         void* data) noexcept
{
    return post_peek(new_peek_op(this, key, expected, true, callback, data, ngx_cycle->log));
}

void ZoneStore::peek_abandon(PeekOp* op) noexcept
{
    if (op->event.posted) {
        ngx_delete_posted_event(&op->event);
    }
    ngx_free(op);
}

PeekOp* ZoneStore::post_peek(PeekOp* op) noexcept
{
    if (op != nullptr) {
        set_event(op->event, on_peek_event, op, ngx_cycle->log);
        ngx_post_event(&op->event, &ngx_posted_events);
    }
    return op;
}

void ZoneStore::on_peek_event(ngx_event_t* ev)
{
    auto* op = static_cast<PeekOp*>(ev->data);
    auto* self = static_cast<ZoneStore*>(op->store);
    std::string_view key = op->args[0];
    ngx_rbtree_key_t hash = hash_of(key);
    LiveStatus status = LiveStatus::gone;
    char* copy = nullptr;
    std::string_view value;
    std::int64_t ttl = -1;
    self->lock(Section::admin);
    ngx_msec_t now = ngx_current_msec;
    if (Node* n = self->find_live(key, hash, now)) {
        if (op->purge) {
            if (value_of(n) == op->args[1]) {
                self->remove(n);
                status = LiveStatus::done;
            }
        } else if ((copy = static_cast<char*>(ngx_alloc(n->value_len ? n->value_len : 1, ngx_cycle->log)))) {
            std::memcpy(copy, value_of(n).data(), n->value_len);
            value = {copy, n->value_len};
            ttl = static_cast<std::int64_t>(static_cast<ngx_msec_int_t>(n->by_expiry.key - now));
            status = LiveStatus::done;
        } else {
            status = LiveStatus::failed;
        }
    }
    self->unlock(Section::admin);
    op->callback(op->data, status, value, ttl);
    ngx_free(copy);
    ngx_free(op);
}

}  // namespace idem::zone
