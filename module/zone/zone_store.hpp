// zone/zone_store.hpp — the Store in nginx shared memory for a single gateway
// without Redis: the same record bytes, indexed by key and expiry, in the
// slab pool under the zone's own mutex; a record that does not fit never
// evicts a live one. It answers at once, but tells the caller on the next
// event-loop turn, as the Store contract promises. Must not touch the
// request. See docs/design.md#how-it-works.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"
#include "zone_lock.hpp"
#include "zone_tree.hpp"

namespace idem::zone {

enum class Claimed { granted, found, full, no_memory };
enum class Stored { stored, done, refused, marker, kept };

class ZoneStore final : public Store, private Tree {
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

    // ClaimStore (zone_store.cpp)
    PendingOp* claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                     const ClaimWaiter& waiter) noexcept override;
    void abandon(PendingOp* op) noexcept override;
    void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view,
                  std::uint64_t ttl_ms, std::uint64_t, Lease*, StoreNotice notice) noexcept override;
    Stored store(std::string_view key, std::string_view claim, std::string_view record, std::uint64_t ttl_ms) noexcept;
    void release(std::string_view key, std::string_view claim, std::uint64_t) noexcept override;
    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Lease* lease) noexcept override;

    // LiveStore and PieceStore (zone_live.cpp)
    LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                        LiveCallback callback, void* data, LiveKind kind) noexcept override;
    LiveOp* live_read(std::string_view key, std::uint64_t at, bool, LiveCallback callback, void* data) noexcept override;
    LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                        void* data) noexcept override;
    void live_abandon(LiveOp* op) noexcept override;
    void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept override;

    // OperatorStore (zone_operator.cpp)
    PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept override;
    PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback, void* data) noexcept override;
    void peek_abandon(PeekOp* op) noexcept override;

private:
    PeekOp* post_peek(PeekOp* op) noexcept;
    static void on_peek_event(ngx_event_t* ev);

    void post_live(LiveOp* op) noexcept;
    LiveStatus append_live(const LiveOp* op, std::string_view bytes, bool& no_room) noexcept;
    void live_full(std::string_view key, LiveKind kind) noexcept;
    LiveStatus read_live(const LiveOp* op, RecordBytes& out) noexcept;
    LiveStatus look_pieces(const LiveOp* op, RecordBytes& out) noexcept;
    static void on_live_event(ngx_event_t* ev);

    void lock(Section section) noexcept { zone::lock(pool_->mutex, section); }
    void unlock(Section section) noexcept { zone::unlock(pool_->mutex, section); }

    Stored replace(Node* n, std::string_view key, ngx_rbtree_key_t hash, std::string_view claim,
                   std::string_view record, ngx_msec_t now, ngx_msec_t expires) noexcept;
    Claimed take(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, RecordBytes& found,
                 std::uint64_t* fence) noexcept;
    static void on_claim_event(ngx_event_t* ev);

    ngx_shm_zone_t* shm_;
};

}  // namespace idem::zone
