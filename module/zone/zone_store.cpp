// zone/zone_store.cpp — see zone_store.hpp. The shape follows nginx's
// limit_req zones: a slab pool per zone, its mutex held only for the short
// tree and copy work of one operation, and the configuration-time object
// handed on across reloads through shm_zone->data.

#include "zone_store.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#include "../log_limit.hpp"
#include "../metrics.hpp"
#include "../pieces.hpp"
#include "zone_lock.hpp"
#include "zone_rules.hpp"
#include "zone_tree.hpp"

namespace idem::zone {
namespace {

constexpr size_t expire_per_claim = 2;     // expired records freed on every claim
constexpr size_t reclaim_batch = 64;       // ... and per round when memory runs out
constexpr size_t max_reclaim_rounds = 16;  // a bound on the work done under the mutex

LogLimiter full_claim_log, full_store_log;

enum class Claimed { granted, found, full, no_memory };
enum class Stored { stored, done, refused, marker, kept };

class ZoneStore final : public Store {
public:
    explicit ZoneStore(ngx_shm_zone_t* shm) noexcept : shm_(shm) {}

    void attach(Shared* sh, ngx_slab_pool_t* pool) noexcept
    {
        sh_ = sh;
        pool_ = pool;
    }
    bool attached() const noexcept { return sh_ != nullptr; }
    Shared* shared() const noexcept { return sh_; }
    ngx_slab_pool_t* pool() const noexcept { return pool_; }

    // The zone answers at once, but the caller is told on the next turn of
    // the event loop, as the Store contract promises.
    PendingOp* claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                     const ClaimWaiter& waiter) noexcept override
    {
        PendingOp* op = new_pending(this, key, claim, lock_ttl_ms, waiter, ngx_cycle->log);
        if (op == nullptr) {
            return nullptr;
        }
        set_event(op->event, on_claim_event, op, ngx_cycle->log);
        ngx_post_event(&op->event, &ngx_posted_events);
        return op;
    }

    void abandon(PendingOp* op) noexcept override
    {
        // Not run yet, so nothing was claimed.
        if (op->event.posted) {
            ngx_delete_posted_event(&op->event);
        }
        ngx_free(op);
    }

    // Under the mutex the fence costs nothing: no lease needed.
    // The record is copied into the zone (and freed here when it was handed over).
    // (Under the mutex a store is never held for later: the marker a full
    // zone keeps is made from the claim, in the claim's room.)
    void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view,
                  std::uint64_t ttl_ms, std::uint64_t, Lease*, StoreNotice notice) noexcept override
    {
        Stored outcome = store(key, claim, record.view(), ttl_ms);
        notice.tell(outcome == Stored::stored || outcome == Stored::done ? StoreOutcome::stored
                                                                         : StoreOutcome::not_stored);
    }

    Stored store(std::string_view key, std::string_view claim, std::string_view record, std::uint64_t ttl_ms) noexcept
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

    void release(std::string_view key, std::string_view claim, std::uint64_t) noexcept override
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

    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Lease* lease) noexcept override
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

    // Live logs: records of their own in the zone, grown in place while
    // there is room, else moved to a node twice the size. An append is
    // made at once, and answered on the next event-loop turn.
    LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                        LiveCallback callback, void* data) noexcept override
    {
        LiveOp* op = new_live_op(this, key, {}, callback, data, ngx_cycle->log);
        if (op != nullptr) {
            op->append = true;
            op->at = at;
            op->ttl_ms = ttl_ms;
            // made now, as a Redis command would be sent now: whatever the
            // worker writes next (a record listing pieces) lands after it
            op->status = append_live(op, bytes);
            post_live(op);
        }
        return op;
    }

    LiveOp* live_read(std::string_view key, std::uint64_t at, bool, LiveCallback callback, void* data) noexcept override
    {
        LiveOp* op = new_live_op(this, key, {}, callback, data, ngx_cycle->log);
        if (op != nullptr) {
            op->at = at;
            post_live(op);
        }
        return op;
    }

    LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                        void* data) noexcept override
    {
        LiveOp* op = new_live_op(this, base, {}, callback, data, ngx_cycle->log);
        if (op != nullptr) {
            op->look = true;
            op->at = count;
            post_live(op);
        }
        return op;
    }

    void live_abandon(LiveOp* op) noexcept override
    {
        if (op->event.posted) {
            ngx_delete_posted_event(&op->event);
        }
        ngx_free(op);
    }

    void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept override
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

    // The operator's plane: under the mutex on the next event-loop turn.
    PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept override
    {
        return post_peek(new_peek_op(this, key, {}, false, callback, data, ngx_cycle->log));
    }

    PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback, void* data) noexcept override
    {
        return post_peek(new_peek_op(this, key, expected, true, callback, data, ngx_cycle->log));
    }

    void peek_abandon(PeekOp* op) noexcept override
    {
        if (op->event.posted) {
            ngx_delete_posted_event(&op->event);
        }
        ngx_free(op);
    }

private:
    PeekOp* post_peek(PeekOp* op) noexcept
    {
        if (op != nullptr) {
            set_event(op->event, on_peek_event, op, ngx_cycle->log);
            ngx_post_event(&op->event, &ngx_posted_events);
        }
        return op;
    }

    static void on_peek_event(ngx_event_t* ev)
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

    void post_live(LiveOp* op) noexcept
    {
        set_event(op->event, on_live_event, op, ngx_cycle->log);
        ngx_post_event(&op->event, &ngx_posted_events);
    }

    // Appends `bytes` to op's log if it ends at op->at (0: makes it).
    LiveStatus append_live(const LiveOp* op, std::string_view bytes) noexcept
    {
        std::string_view key = op->args[0];
        ngx_rbtree_key_t hash = hash_of(key);
        lock(Section::live);
        ngx_msec_t now = ngx_current_msec;
        Node* n = find_live(key, hash, now);
        LiveStatus status = LiveStatus::gone;
        if (n == nullptr && op->at == 0) {
            n = insert(key, hash, bytes, now, now + op->ttl_ms);
            status = n != nullptr ? LiveStatus::done : LiveStatus::failed;
        } else if (n != nullptr && n->value_len == op->at) {
            size_t need = n->value_len + bytes.size();
            if (need > n->capacity) {
                Node* grown = allocate(key.size(), ngx_max(need, 2 * static_cast<size_t>(n->capacity)), now);
                if (grown == nullptr) {
                    unlock(Section::live);
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

    // The log's bytes from op->at on, copied out (ngx_alloc'd, owned by `out`).
    LiveStatus read_live(const LiveOp* op, RecordBytes& out) noexcept
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

    // Each piece's size and name (pieces.hpp's look entries), copied out.
    LiveStatus look_pieces(const LiveOp* op, RecordBytes& out) noexcept
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

    static void on_live_event(ngx_event_t* ev)
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

    void lock(Section section) noexcept { zone::lock(pool_->mutex, section); }
    void unlock(Section section) noexcept { zone::unlock(pool_->mutex, section); }

    // The by-key tree's key of a store key: its CRC32, computed before the
    // mutex is taken (hashing a 69-byte key is most of the instructions a
    // lookup runs). ngx_crc32_long gives the same value as ngx_crc32_short,
    // with a table of 256 entries instead of 16, so a zone kept across a
    // reload is ordered the same way.
    static ngx_rbtree_key_t hash_of(std::string_view key) noexcept
    {
        return static_cast<ngx_rbtree_key_t>(ngx_crc32_long(bytes_of(key), key.size()));
    }

    // ------------------------------------------------ under the mutex

    // The record under `key` (whose hash_of is `hash`), unless there is none
    // or it has expired (then it is freed: an expired record is as good as
    // absent).
    Node* find_live(std::string_view key, ngx_rbtree_key_t hash, ngx_msec_t now) noexcept
    {
        ngx_rbtree_node_t* n = sh_->by_key.root;
        ngx_rbtree_node_t* sentinel = sh_->by_key.sentinel;
        while (n != sentinel) {
            if (hash != n->key) {
                n = hash < n->key ? n->left : n->right;
                continue;
            }
            Node* node = node_by_key(n);
            int rc = key.compare(key_of(node));
            if (rc == 0) {
                if (expired(node->by_expiry.key, now)) {
                    remove(node);
                    return nullptr;
                }
                return node;
            }
            n = rc < 0 ? n->left : n->right;
        }
        return nullptr;
    }

    // Frees up to `max` expired records, oldest expiry first; returns how many.
    size_t expire(size_t max, ngx_msec_t now) noexcept
    {
        size_t freed = 0;
        ngx_rbtree_node_t* sentinel = sh_->by_expiry.sentinel;
        while (freed < max && sh_->by_expiry.root != sentinel) {
            ngx_rbtree_node_t* first = ngx_rbtree_min(sh_->by_expiry.root, sentinel);
            if (!expired(first->key, now)) {
                break;
            }
            remove(node_by_expiry(first));
            freed++;
        }
        return freed;
    }

    // A node for a key and value of these sizes; when the zone is full,
    // expired records are reclaimed first, a bounded number of them. Never
    // a live one: nullptr then.
    Node* allocate(size_t key_len, size_t value_len, ngx_msec_t now) noexcept
    {
        size_t size = offsetof(Node, data) + key_len + value_len;
        void* p = ngx_slab_alloc_locked(pool_, size);
        for (size_t round = 0; p == nullptr && round < max_reclaim_rounds; round++) {
            if (expire(reclaim_batch, now) == 0) {
                break;
            }
            p = ngx_slab_alloc_locked(pool_, size);
        }
        auto* n = static_cast<Node*>(p);
        if (n != nullptr) {
            n->key_len = static_cast<std::uint32_t>(key_len);
            n->capacity = static_cast<std::uint32_t>(value_len);
        }
        return n;
    }

    void set_value(Node* n, std::string_view value) noexcept
    {
        std::memcpy(n->data + n->key_len, value.data(), value.size());
        n->value_len = static_cast<std::uint32_t>(value.size());
    }

    void expire_at(Node* n, ngx_msec_t expires) noexcept
    {
        ngx_rbtree_delete(&sh_->by_expiry, &n->by_expiry);
        n->by_expiry.key = expires;
        ngx_rbtree_insert(&sh_->by_expiry, &n->by_expiry);
    }

    Node* insert(std::string_view key, ngx_rbtree_key_t hash, std::string_view value, ngx_msec_t now,
                 ngx_msec_t expires) noexcept
    {
        Node* n = allocate(key.size(), value.size(), now);
        if (n == nullptr) {
            return nullptr;
        }
        std::memcpy(n->data, key.data(), key.size());
        set_value(n, value);
        n->by_key.key = hash;
        n->by_expiry.key = expires;
        ngx_rbtree_insert(&sh_->by_key, &n->by_key);
        ngx_rbtree_insert(&sh_->by_expiry, &n->by_expiry);
        return n;
    }

    void remove(Node* n) noexcept
    {
        ngx_rbtree_delete(&sh_->by_key, &n->by_key);
        ngx_rbtree_delete(&sh_->by_expiry, &n->by_expiry);
        ngx_slab_free_locked(pool_, n);
    }

    // The claim `n` becomes the record. Without room for it, the claim
    // becomes the unreplayable marker (it fits where the claim was): the
    // response was executed and must never run again, so its retries get
    // 410 until `expires`.
    Stored replace(Node* n, std::string_view key, ngx_rbtree_key_t hash, std::string_view claim,
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

    // Claims `key` if it is free (or its record expired), else copies out
    // the record found (ngx_alloc'd, owned by `found`).
    // `fence`: a granted claim draws one — the clock in microseconds since
    // the Unix epoch, or one more than the zone's last fence if that is not
    // less (docs/design.md#the-fence).
    Claimed take(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, RecordBytes& found,
                 std::uint64_t* fence) noexcept
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

    // ------------------------------------------------ the claim's answer

    static void on_claim_event(ngx_event_t* ev)
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

    static u_char* bytes_of(std::string_view s) noexcept
    {
        return reinterpret_cast<u_char*>(const_cast<char*>(s.data()));
    }

    ngx_shm_zone_t* shm_;
    Shared* sh_ = nullptr;
    ngx_slab_pool_t* pool_ = nullptr;
};

// A reload hands the old configuration's store to the new one: the records
// stay where they are (nginx keeps a zone whose name and size are unchanged).
ngx_int_t init_zone(ngx_shm_zone_t* shm_zone, void* data)
{
    auto* store = static_cast<ZoneStore*>(shm_zone->data);
    if (auto* old = static_cast<ZoneStore*>(data)) {
        store->attach(old->shared(), old->pool());
        return NGX_OK;
    }
    auto* pool = reinterpret_cast<ngx_slab_pool_t*>(shm_zone->shm.addr);
    if (shm_zone->shm.exists) {
        store->attach(static_cast<Shared*>(pool->data), pool);
        return NGX_OK;
    }
    auto* sh = static_cast<Shared*>(ngx_slab_alloc(pool, sizeof(Shared)));
    if (sh == nullptr) {
        return NGX_ERROR;
    }
    pool->data = sh;
    ngx_rbtree_init(&sh->by_key, &sh->key_sentinel, insert_by_key);
    ngx_rbtree_init(&sh->by_expiry, &sh->expiry_sentinel, ngx_rbtree_insert_value);
    sh->last_fence = 0;

    size_t len = sizeof(" in idempotency zone \"\"") + shm_zone->shm.name.len;
    pool->log_ctx = static_cast<u_char*>(ngx_slab_alloc(pool, len));
    if (pool->log_ctx == nullptr) {
        return NGX_ERROR;
    }
    ngx_sprintf(pool->log_ctx, " in idempotency zone \"%V\"%Z", &shm_zone->shm.name);
    pool->log_nomem = 0;  // a full zone is reported by the store, once per second
    store->attach(sh, pool);
    return NGX_OK;
}


}  // namespace

namespace {

// Tags the store zones, so that a zone name used by another module (or the
// metrics zone) is refused by nginx instead of being shared.
char zone_tag;

}  // namespace

ngx_shm_zone_t* add_zone(ngx_conf_t* cf, ngx_str_t& name, size_t size) noexcept
{
    return ngx_shared_memory_add(cf, &name, size, &zone_tag);
}

bool make_store(ngx_conf_t* cf, ngx_shm_zone_t* shm) noexcept
{
    void* memory = ngx_pcalloc(cf->pool, sizeof(ZoneStore));
    if (memory == nullptr) {
        return false;
    }
    // In the configuration's pool, like the rest of it; nothing to destroy.
    shm->data = new (memory) ZoneStore(shm);
    shm->init = init_zone;
    return true;
}

bool defined(const ngx_shm_zone_t* zone) noexcept
{
    return zone->data != nullptr;
}

Store* attached_store(ngx_shm_zone_t* zone) noexcept
{
    auto* store = static_cast<ZoneStore*>(zone->data);
    return store != nullptr && store->attached() ? store : nullptr;
}

}  // namespace idem::zone
