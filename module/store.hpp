// store.hpp — the store interface, one part per concern so each caller holds
// only what it uses; Store is what a backend implements. Knows neither
// backend. Every operation touches one key and never blocks.
// See docs/design.md#store-protocols.
#pragma once

#include <cstdint>
#include <string_view>

#include "compression.hpp"
#include "decide.hpp"
#include "lease.hpp"
#include "ngx.hpp"
#include "outcome.hpp"
#include "owned_args.hpp"
#include "record.hpp"
#include "record_bytes.hpp"
#include "seal.hpp"

namespace idem {

class ClaimStore;
class LiveStore;
class OperatorStore;

struct ClaimResult {
    Outcome outcome;
    const Record* record;     // replayed: the stored response, decoded from `stored`; unreplayable: the marker
    std::string_view stored;  // the record found; both valid during the callback only
    // Not nullptr: the bytes `stored` views, held by the store during the
    // callback; the request may move them out, what it leaves the store frees.
    RecordBytes* bytes = nullptr;
    // fresh: the claim's fence (docs/design.md#the-fence) if asked and drawn; 0: none
    std::uint64_t fence = 0;
};

using ClaimCallback = void (*)(void* data, const ClaimResult& result);

// `done`: the bytes read (valid during the callback only) or the append made;
// `gone`: no log (a read), or it does not end where the append goes;
// `failed`: the store cannot say; `lost`: cannot say for now (connection lost,
// transient error), so the same operation sent again may land.
enum class LiveStatus : std::uint8_t { done, gone, failed, lost };
using LiveCallback = void (*)(void* data, LiveStatus status, std::string_view bytes);

enum class LiveKind { log, piece };

// Its callback is not run once abandoned (LiveStore::live_abandon).
struct LiveOp {
    LiveStore* store;
    LiveCallback callback;  // nullptr once abandoned
    void* data;
    std::uint64_t at;       // where the read starts, or where the append goes (a store may keep its own use)
    std::uint64_t ttl_ms;   // an append's: the log lives this long after it
    bool append;
    bool may_be_gone;       // a read that must tell a log that is gone from one that did not grow
    bool look;              // a look at pieces (PieceStore::pieces_look): `at` is their count
    LiveStatus status;      // a store that acts at once and answers later (the zone's appends)
    ngx_event_t event;      // a store that answers on the next event-loop turn (the zone)
    OwnedArgs<2> args;      // the log's key (and nothing else: an append's bytes are used at once)
};

// A peek: `done` with the value now (valid during the callback only) and its
// ms left (-1: no expiry), `gone` when nothing is there. A purge: `done` when
// it removed the key still holding exactly the value expected, else `gone`.
using PeekCallback = void (*)(void* data, LiveStatus status, std::string_view value, std::int64_t ttl_ms);

struct PeekOp {
    OperatorStore* store;
    PeekCallback callback;  // nullptr once abandoned
    void* data;
    bool purge;
    ngx_event_t event;      // a store that answers on the next event-loop turn (the zone)
    OwnedArgs<2> args;      // the key, a purge's expected value
};

// Kept from one record to the next.
RecordInflater& worker_inflater() noexcept;
RecordCompressor& worker_compressor() noexcept;

// Every store keeps one with each claim in flight.
struct ClaimWaiter {
    ClaimCallback callback;  // nullptr once abandoned
    void* data;
    Digest fingerprint;
    const SecretKey* keys;   // idempotency_encrypt_key, to open sealed records
    std::size_t key_count;
    bool fence;              // a granted claim draws its fence (docs/design.md#the-fence)
    ReplayLimits limits;     // the location's: what a record found may hold (decide.hpp)
    Dictionaries dictionaries;  // idempotency_compress_dictionary: what compressed records may need

    void answer(Outcome outcome) const noexcept;
    void granted(std::uint64_t fence) const noexcept;
    // One that cannot be used is logged. The request may keep the bytes
    // (ClaimResult::bytes); else they are freed here.
    void answer_found(std::string_view key, RecordBytes found, ngx_log_t* log) const noexcept;
};

// Copies the key and claim record, so a claim granted after its request
// stopped waiting can still be released.
struct PendingOp {
    ClaimStore* store;
    ClaimWaiter waiter;
    std::uint64_t lock_ttl_ms;
    ngx_event_t event;  // a store that answers on the next event-loop turn (the zone)
    OwnedArgs<2> args;  // the key, the claim record

    std::string_view key() const noexcept { return args[0]; }
    std::string_view claim() const noexcept { return args[1]; }
};

// Called once the store holds the settle (Redis answered; the zone at once),
// not when it was sent: waiters in every worker look now and find it.
void store_settled(std::string_view key) noexcept;

// `not_stored`: did not land and will not (the claim was lost, or the store
// gave up or kept the marker); `unknown`: the store cannot say.
enum class StoreOutcome : std::uint8_t { unknown, stored, not_stored };

// Told once: at once, or when the store's last attempt is answered.
struct StoreNotice {
    void (*callback)(void* data, StoreOutcome outcome) = nullptr;
    void* data = nullptr;

    void tell(StoreOutcome outcome) const noexcept
    {
        if (callback != nullptr) {
            callback(data, outcome);
        }
    }
};

// Freed with ngx_free; nullptr when out of memory.
PendingOp* new_pending(ClaimStore* store, std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                       const ClaimWaiter& waiter, ngx_log_t* log) noexcept;

class ClaimStore {
public:
    virtual ~ClaimStore() = default;

    // Claims or reads what is there, in one round trip. nullptr when the store
    // cannot be reached now; otherwise the waiter is answered exactly once,
    // unless abandoned.
    virtual PendingOp* claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                             const ClaimWaiter& waiter) noexcept = 0;

    // The callback is not run; a claim that turns out granted is released.
    virtual void abandon(PendingOp* op) noexcept = 0;

    // Fenced by the claim record; fire and forget. A transient failure (Redis:
    // lost connection, OOM, BUSY, LOADING, READONLY) the store retries alone:
    // a response for lock_ttl_ms (at least 20 s) with the claim kept alive, a
    // release until the claim would have expired. lock_ttl_ms 0: the longest
    // this store has used. A response refused for OOM extends the claim to
    // ttl_ms (needs no memory), so no retry executes twice, and is retried
    // until it lands — as `marker` once the worker holds its cap of such
    // bytes. `lease` (nullptr: none): while it holds, the fence may be
    // skipped. Owned `record` bytes are kept, borrowed ones copied. `notice`
    // is told what became of the record.
    virtual void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                          std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease,
                          StoreNotice notice = {}) noexcept = 0;
    virtual void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms = 0) noexcept = 0;
    // A claim that is gone revokes `lease` (nullptr: none).
    virtual void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                       Lease* lease) noexcept = 0;
};

class LiveStore {
public:
    virtual ~LiveStore() = default;

    // docs/design.md#live-join. An append lands only where the log ends now
    // (`at` 0 makes it, living ttl_ms; later appends leave that to
    // live_expire). A read tells a gone log from one that did not grow only
    // when `may_be_gone` asks (Redis then needs a script). nullptr when the
    // store cannot be reached now; otherwise the callback runs once, unless
    // abandoned. `kind` is for what a store reports when it has no room.
    virtual LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes,
                                std::uint64_t ttl_ms, LiveCallback callback, void* data,
                                LiveKind kind = LiveKind::log) noexcept = 0;
    virtual LiveOp* live_read(std::string_view key, std::uint64_t at, bool may_be_gone, LiveCallback callback,
                              void* data) noexcept = 0;
    virtual void live_abandon(LiveOp* op) noexcept = 0;
    // Fire and forget; 0: it goes now.
    virtual void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept = 0;
};

class PieceStore : public LiveStore {
public:
    // `done` with each piece's size and name (pieces.hpp), in one step on
    // their slot's store; nullptr and the callback as for live_read. The pieces
    // themselves go through live_append at 0, live_read from 0, live_expire.
    virtual LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                                void* data) noexcept = 0;
};

class OperatorStore {
public:
    virtual ~OperatorStore() = default;

    // nullptr when the store cannot be reached now; else the callback runs once.
    virtual PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept = 0;
    virtual PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback,
                          void* data) noexcept = 0;
    virtual void peek_abandon(PeekOp* op) noexcept = 0;
};

class Store : public ClaimStore, public PieceStore, public OperatorStore {};

// Freed with ngx_free; nullptr when out of memory.
LiveOp* new_live_op(LiveStore* store, std::string_view key, std::string_view bytes, LiveCallback callback, void* data,
                    ngx_log_t* log) noexcept;

// Freed with ngx_free; nullptr when out of memory.
PeekOp* new_peek_op(OperatorStore* store, std::string_view key, std::string_view expected, bool purge,
                    PeekCallback callback, void* data, ngx_log_t* log) noexcept;

// Held once by its creator; nullptr when out of memory (stores then go fenced).
Lease* new_lease(std::uint64_t end, ngx_log_t* log) noexcept;
inline Lease* hold_lease(Lease* lease) noexcept
{
    if (lease != nullptr) {
        lease->refs++;
    }
    return lease;
}
void drop_lease(Lease* lease) noexcept;

}  // namespace idem
