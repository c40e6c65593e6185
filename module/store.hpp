// store.hpp — the store interface: where claims and responses live, and
// what every store shares (the claim in flight, its waiter and how a found
// record is judged, the lease's reference count). The interface comes in
// one part per concern, so that each caller holds only what it uses: the
// claims and records (ClaimStore: claim.cpp, wait.cpp), the live log
// (LiveStore: feed.cpp, piece_writer.cpp), a response's pieces (PieceStore:
// piece_replay.cpp) and the operator's plane (OperatorStore: admin.cpp);
// Store is all of them, what a backend implements — redis/redis_store.*
// over Redis, zone/zone_store.* in nginx shared memory — and what
// store_factory.* hands the request; this file knows neither backend.
// Every operation touches exactly one key and never blocks.
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
    // Not nullptr: the bytes `stored` views — the reply's string, the zone's
    // copy out of shared memory, or the opened copy of a sealed record —
    // held by the store during the callback. The request may move them out
    // and keep them instead of copying the record; what it leaves, the
    // store frees.
    RecordBytes* bytes = nullptr;
    // fresh: the claim's fence (docs/design.md#the-fence), when the waiter
    // asked for one and the store could draw it; 0: none
    std::uint64_t fence = 0;
};

using ClaimCallback = void (*)(void* data, const ClaimResult& result);

// A live log's operation answered (docs/design.md#live-join): `done` with
// the bytes read (a read; valid during the callback only), or the append
// made; `gone` when the log does not exist (a read) or does not end where
// the append was to go (an append); `failed` when the store cannot say;
// `lost` when it cannot say for now — no answer came (a lost connection)
// or the store answered "not now" (a transient error) —, so that the same
// operation sent again may land (a piece's write is, piece_writer.hpp).
enum class LiveStatus : std::uint8_t { done, gone, failed, lost };
using LiveCallback = void (*)(void* data, LiveStatus status, std::string_view bytes);

// What a live log's bytes are: a response's live log, or one of its pieces.
enum class LiveKind { log, piece };

// A live log's operation in flight; the callback is not run once it is
// abandoned (LiveStore::live_abandon).
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

// The operator's plane (docs/design.md#inspect-and-purge): a peek answers
// `done` with the value under a key now (valid during the callback only)
// and the milliseconds it has left (-1: no expiry), `gone` when nothing is
// there; a purge answers `done` when it removed the key, which still held
// exactly the value expected, and `gone` when it held anything else or
// nothing. `failed`: the store cannot say.
using PeekCallback = void (*)(void* data, LiveStatus status, std::string_view value, std::int64_t ttl_ms);

// A peek or purge in flight; the callback is not run once it is abandoned.
struct PeekOp {
    OperatorStore* store;
    PeekCallback callback;  // nullptr once abandoned
    void* data;
    bool purge;
    ngx_event_t event;      // a store that answers on the next event-loop turn (the zone)
    OwnedArgs<2> args;      // the key, a purge's expected value
};

// The worker's zstd contexts for compressed records and pieces
// (compression.hpp), kept from one record to the next.
RecordInflater& worker_inflater() noexcept;
RecordCompressor& worker_compressor() noexcept;

// Who waits for a claim, and how to judge the record it finds; every store
// keeps one with each claim in flight.
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
    // Answers with what `found`, the record read under `key`, means for the
    // request (decide.hpp); one that cannot be used is logged. The request
    // may keep the bytes (ClaimResult::bytes); else they are freed here.
    void answer_found(std::string_view key, RecordBytes found, ngx_log_t* log) const noexcept;
};

// A claim in flight, the same for every store: who waits for it, and
// copies of the key and the claim record, so that a claim granted after
// its request stopped waiting can still be released.
struct PendingOp {
    ClaimStore* store;
    ClaimWaiter waiter;
    std::uint64_t lock_ttl_ms;
    ngx_event_t event;  // a store that answers on the next event-loop turn (the zone)
    OwnedArgs<2> args;  // the key, the claim record

    std::string_view key() const noexcept { return args[0]; }
    std::string_view claim() const noexcept { return args[1]; }
};

// A backend settled a claim under `key` — stored a response or its marker,
// released the key, or found that the claim had moved on — once the store
// holds it (Redis answered; the zone at once), not when it was sent: the
// requests waiting for that key in every worker of this nginx look now
// (the live board's settles, wait.cpp), and find it.
void store_settled(std::string_view key) noexcept;

// What became of a record handed to ClaimStore::complete, for whoever asked
// (StoreNotice): `stored` once it landed; `not_stored` when it did not and
// will not (the claim was lost: the fenced write found another value; the
// store gave up on it, or kept the marker instead); `unknown` when the
// store cannot say (a reply it could not read, the worker exiting).
enum class StoreOutcome : std::uint8_t { unknown, stored, not_stored };

// Told once what became of a record (nothing when `callback` is nullptr):
// at once, or when the store's last attempt at it is answered.
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

// Claims and records: a key claimed, and settled by its holder alone.
class ClaimStore {
public:
    virtual ~ClaimStore() = default;

    // Claims `key` with the claim record `claim` for lock_ttl_ms, or reads
    // what is already there, in one round trip. Returns nullptr when the
    // store cannot be reached now (the caller answers at once); otherwise
    // the waiter is answered exactly once, unless the operation is abandoned.
    virtual PendingOp* claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                             const ClaimWaiter& waiter) noexcept = 0;

    // The caller stops waiting (timeout, request gone): the callback is not
    // run, and a claim that turns out to have been granted is released.
    virtual void abandon(PendingOp* op) noexcept = 0;

    // Fenced by the claim record: only its holder stores or releases.
    // Fire and forget: the outcome is logged, the request is not needed.
    // What meets a transient failure (Redis: a lost connection, an error
    // such as OOM, BUSY, LOADING or READONLY) the store tries again by
    // itself, its request being gone by then: a response for the claim's
    // lock_ttl_ms (at least 20 s) with the claim kept alive meanwhile, a
    // release until the claim would have expired anyway. lock_ttl_ms 0:
    // the longest lock_ttl this store has claimed or renewed with.
    // A response refused for memory (OOM) keeps its key: the claim is
    // extended to ttl_ms from that refusal (which needs no memory), so no
    // retry executes a second time, and the store is tried again until it
    // lands or that extended life ends — with `record`, or, when the worker
    // already holds as many bytes for such stores as it may, with `marker`
    // (the unreplayable marker, sealed as the record is; a Redis store
    // copies it): once Redis takes writes again, the key gets its answer.
    // `lease`: the claim's lease (lease.hpp; nullptr: none), judged when the
    // store leaves: while it holds, a store may skip the fence. `record`:
    // bytes it owns the store keeps as they are, borrowed ones it copies.
    // `notice` is told what became of the record (the writer of its pieces
    // deletes them when it did not land, piece_writer.hpp).
    virtual void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                          std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease,
                          StoreNotice notice = {}) noexcept = 0;
    virtual void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms = 0) noexcept = 0;
    // Extends a claim still held by `claim` to lock_ttl_ms from now; one
    // that is gone revokes `lease` (nullptr: none).
    virtual void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                       Lease* lease) noexcept = 0;
};

// The live log of a response being joined.
class LiveStore {
public:
    virtual ~LiveStore() = default;

    // Live logs (docs/design.md#live-join): the bytes an original publishes
    // under a key of its own while its response streams, for duplicates in
    // other workers and gateways to follow. An append lands only where the
    // log ends now (`at`: 0 makes the log, which then lives ttl_ms; later
    // appends leave its life to live_expire); a read gives the log's bytes
    // from `at` on, and `gone` for a log that does not exist — told apart
    // from one that did not grow only when `may_be_gone` asks (Redis then
    // needs a script). nullptr when the store cannot be reached now;
    // otherwise the callback runs once, unless the operation is abandoned.
    // `kind` says what the bytes are, for what a store reports when it has
    // no room for them (the zone: a piece is part of a response's store).
    virtual LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes,
                                std::uint64_t ttl_ms, LiveCallback callback, void* data,
                                LiveKind kind = LiveKind::log) noexcept = 0;
    virtual LiveOp* live_read(std::string_view key, std::uint64_t at, bool may_be_gone, LiveCallback callback,
                              void* data) noexcept = 0;
    virtual void live_abandon(LiveOp* op) noexcept = 0;
    // The log lives ttl_ms from now (fire and forget; 0: it goes now).
    virtual void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept = 0;
};

// A response's pieces: live logs of their own (so a PieceStore is a
// LiveStore), and a look at them all in one step.
class PieceStore : public LiveStore {
public:
    // A response kept in pieces (pieces.hpp): a look at its `count` pieces,
    // whose keys begin with `base`, in one step on the store of their slot:
    // `done` with each one's size and name (pieces.hpp's look entries),
    // `failed` when the store cannot say. nullptr when the store cannot be
    // reached now; otherwise the callback runs once, unless abandoned
    // (live_abandon). The pieces themselves are written, read and deleted
    // as live logs are: live_append at 0, live_read from 0, live_expire.
    virtual LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                                void* data) noexcept = 0;
};

// The operator's plane (PeekCallback).
class OperatorStore {
public:
    virtual ~OperatorStore() = default;

    // nullptr when the store cannot be reached now; otherwise the callback
    // runs once, unless abandoned.
    virtual PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept = 0;
    virtual PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback,
                          void* data) noexcept = 0;
    virtual void peek_abandon(PeekOp* op) noexcept = 0;
};

// What a backend implements, and what store_factory.hpp hands the request:
// every concern above, each caller keeping the part it uses.
class Store : public ClaimStore, public PieceStore, public OperatorStore {};

// Freed with ngx_free; nullptr when out of memory.
LiveOp* new_live_op(LiveStore* store, std::string_view key, std::string_view bytes, LiveCallback callback, void* data,
                    ngx_log_t* log) noexcept;

// Freed with ngx_free; nullptr when out of memory.
PeekOp* new_peek_op(OperatorStore* store, std::string_view key, std::string_view expected, bool purge,
                    PeekCallback callback, void* data, ngx_log_t* log) noexcept;

// A lease ending at `end` (lease.hpp), held once by its creator;
// nullptr when out of memory (the request's stores then go fenced).
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
