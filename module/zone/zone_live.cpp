// zone/zone_live.cpp — see zone_store.hpp: live logs and pieces, records of
// their own in the zone.

#include "zone_store.hpp"

#include <cstring>

#include "../log_limit.hpp"
#include "../metrics.hpp"
#include "../pieces.hpp"

namespace idem::zone {

namespace {

LogLimiter full_piece_log, full_live_log;

}  // namespace

// No room for a piece means none for its response (its record becomes the
// marker: 410), so it counts as a store refused; no room for a live log cuts
// off its followers in other workers.
void ZoneStore::live_full(std::string_view key, LiveKind kind) noexcept
{
    bool piece = kind == LiveKind::piece;
    count(piece ? Counter::zone_full_stores : Counter::zone_full_live);
    LogLimiter& limiter = piece ? full_piece_log : full_live_log;
    if (limiter.admit()) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      piece ? "idempotency: zone \"%V\" is full: a piece of a response (\"%*s\") is not stored, the "
                              "response's retries get 410 (%ui since the last line)"
                            : "idempotency: zone \"%V\" is full: the live log \"%*s\" is given up, its followers in "
                              "other workers are cut off (%ui since the last line)",
                      &shm_->shm.name, key.size(), key.data(), limiter.take());
    }
}

// Grown in place while there is room, else moved to a node twice the size.
// Made at once, answered on the next event-loop turn.
LiveOp* ZoneStore::live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                               LiveCallback callback, void* data, LiveKind kind) noexcept
{
    LiveOp* op = new_live_op(this, key, {}, callback, data, ngx_cycle->log);
    if (op != nullptr) {
        op->append = true;
        op->at = at;
        op->ttl_ms = ttl_ms;
        // made now, as a Redis command would be sent now: whatever the
        // worker writes next (a record listing pieces) lands after it
        bool no_room = false;
        op->status = append_live(op, bytes, no_room);
        if (no_room) {
            live_full(key, kind);
        }
        post_live(op);
    }
    return op;
}

LiveOp* ZoneStore::live_read(std::string_view key, std::uint64_t at, bool, LiveCallback callback,
                             void* data) noexcept
{
    LiveOp* op = new_live_op(this, key, {}, callback, data, ngx_cycle->log);
    if (op != nullptr) {
        op->at = at;
        post_live(op);
    }
    return op;
}

LiveOp* ZoneStore::pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                               void* data) noexcept
{
    LiveOp* op = new_live_op(this, base, {}, callback, data, ngx_cycle->log);
    if (op != nullptr) {
        op->look = true;
        op->at = count;
        post_live(op);
    }
    return op;
}

void ZoneStore::live_abandon(LiveOp* op) noexcept
{
    if (op->event.posted) {
        ngx_delete_posted_event(&op->event);
    }
    ngx_free(op);
}

void ZoneStore::live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept
{
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::live);
    ngx_msec_t now = ngx_current_msec;
    if (Node* n = find_live(key, hash, now)) {
        if (ttl_ms == 0) {
            remove(n);
        } else {
            expire_at(n, now + ttl_ms);
        }
    }
    unlock(Section::live);
}

void ZoneStore::post_live(LiveOp* op) noexcept
{
    set_event(op->event, on_live_event, op, ngx_cycle->log);
    ngx_post_event(&op->event, &ngx_posted_events);
}

// 0: makes it.
LiveStatus ZoneStore::append_live(const LiveOp* op, std::string_view bytes, bool& no_room) noexcept
{
    std::string_view key = op->args[0];
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::live);
    ngx_msec_t now = ngx_current_msec;
    Node* n = find_live(key, hash, now);
    LiveStatus status = LiveStatus::gone;
    if (n == nullptr && op->at == 0) {
        n = insert(key, hash, bytes, now, now + op->ttl_ms);
        no_room = n == nullptr;
        status = n != nullptr ? LiveStatus::done : LiveStatus::failed;
    } else if (n != nullptr && n->value_len == op->at) {
        size_t need = n->value_len + bytes.size();
        if (need > n->capacity) {
            Node* grown = allocate(key.size(), ngx_max(need, 2 * static_cast<size_t>(n->capacity)), now);
            if (grown == nullptr) {
                unlock(Section::live);
                no_room = true;
                return LiveStatus::failed;
            }
            std::memcpy(grown->data, n->data, n->key_len + n->value_len);
            grown->value_len = n->value_len;
            grown->by_key.key = hash;
            grown->by_expiry.key = n->by_expiry.key;
            remove(n);
            ngx_rbtree_insert(&sh_->by_key, &grown->by_key);
            ngx_rbtree_insert(&sh_->by_expiry, &grown->by_expiry);
            n = grown;
        }
        std::memcpy(n->data + n->key_len + n->value_len, bytes.data(), bytes.size());
        n->value_len = static_cast<std::uint32_t>(need);
        status = LiveStatus::done;
    }
    unlock(Section::live);
    return status;
}

// Copied out (ngx_alloc'd, owned by `out`).
LiveStatus ZoneStore::read_live(const LiveOp* op, RecordBytes& out) noexcept
{
    std::string_view key = op->args[0];
    ngx_rbtree_key_t hash = hash_of(key);
    lock(Section::live);
    Node* n = find_live(key, hash, ngx_current_msec);
    LiveStatus status = n != nullptr ? LiveStatus::done : LiveStatus::gone;
    if (n != nullptr && op->at < n->value_len) {
        size_t size = n->value_len - op->at;
        auto* copy = static_cast<char*>(ngx_alloc(size, ngx_cycle->log));
        if (copy == nullptr) {
            status = LiveStatus::failed;
        } else {
            std::memcpy(copy, value_of(n).data() + op->at, size);
            out = RecordBytes::owned(copy, {copy, size});
        }
    }
    unlock(Section::live);
    return status;
}

// pieces.hpp's look entries, copied out.
LiveStatus ZoneStore::look_pieces(const LiveOp* op, RecordBytes& out) noexcept
{
    std::string_view base = op->args[0];
    auto count = static_cast<std::uint32_t>(op->at);
    std::size_t key_size = base.size() + piece_index_digits;
    auto* look = static_cast<char*>(ngx_alloc(count * piece_look_entry_size, ngx_cycle->log));
    auto* keys = static_cast<char*>(ngx_alloc(key_size * count, ngx_cycle->log));
    auto* hashes = static_cast<ngx_rbtree_key_t*>(ngx_alloc(count * sizeof(ngx_rbtree_key_t), ngx_cycle->log));
    if (look == nullptr || keys == nullptr || hashes == nullptr) {
        ngx_free(look);
        ngx_free(keys);
        ngx_free(hashes);
        return LiveStatus::failed;
    }
    for (std::uint32_t i = 0; i < count; i++) {
        write_piece_key(base, i, keys + key_size * i);
        hashes[i] = hash_of({keys + key_size * i, key_size});
    }
    char* p = look;
    lock(Section::live);
    ngx_msec_t now = ngx_current_msec;
    for (std::uint32_t i = 0; i < count; i++) {
        Node* n = find_live({keys + key_size * i, key_size}, hashes[i], now);
        p = n != nullptr ? encode_piece_look(p, n->value_len, value_of(n)) : encode_piece_look(p, absent_piece, {});
    }
    unlock(Section::live);
    ngx_free(keys);
    ngx_free(hashes);
    out = RecordBytes::owned(look, {look, count * piece_look_entry_size});
    return LiveStatus::done;
}

void ZoneStore::on_live_event(ngx_event_t* ev)
{
    auto* op = static_cast<LiveOp*>(ev->data);
    auto* self = static_cast<ZoneStore*>(op->store);
    RecordBytes read;
    LiveStatus status = op->look     ? self->look_pieces(op, read)
                        : op->append ? op->status
                                     : self->read_live(op, read);
    op->callback(op->data, status, read.view());
    ngx_free(op);
}

}  // namespace idem::zone
