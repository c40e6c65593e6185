// store_call.hpp — one store operation somebody awaits (a replay from
// pieces, the operator's endpoint, a live feed): the operation, its
// deadline, and its abandonment when whoever awaits it goes first. Every
// answer that waits on the store has these three; kept together, an answer
// that comes after the deadline, or after its request ended, is never
// delivered, and no caller has to remember why.
// Must not touch: the request it may serve (the caller answers it).
#pragma once

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

class StoreCall {
public:
    using Timeout = void (*)(void* data);

    // `on_timeout(data)` runs when a deadline passes before the answer:
    // the operation is abandoned first (nullptr: one that is never given
    // a deadline).
    void init(Timeout on_timeout, void* data, ngx_log_t* log) noexcept;
    // The operation is abandoned when `pool` goes (a request's pool):
    // whoever awaits it lives there. False when out of memory.
    bool bind(ngx_pool_t* pool) noexcept;

    // Awaits `op`, for `timeout_ms` (0: as long as the store takes). False
    // when there is nothing to await: the store could not be reached.
    bool await(LiveStore* store, LiveOp* op, ngx_msec_t timeout_ms) noexcept;
    bool await(OperatorStore* store, PeekOp* op, ngx_msec_t timeout_ms) noexcept;
    // Called first by the operation's callback: nothing is left to abandon.
    void answered() noexcept;
    // The store drops the answer; the deadline goes. Harmless when idle.
    void abandon() noexcept;

    bool pending() const noexcept { return op_ != nullptr; }

private:
    static void on_deadline(ngx_event_t* ev);
    static void on_pool_gone(void* data);
    bool arm(void* op, bool peek, ngx_msec_t timeout_ms) noexcept;

    // the store that abandons op_: the live log's, or (peek_) the operator's
    LiveStore* live_store_ = nullptr;
    OperatorStore* operator_store_ = nullptr;
    void* op_ = nullptr;
    bool peek_ = false;
    Timeout on_timeout_ = nullptr;
    void* data_ = nullptr;
    ngx_event_t timer_{};
};

}  // namespace idem
