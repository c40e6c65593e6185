// store_call.hpp — one awaited store operation with its deadline and its
// abandonment when the awaiter goes first, kept together so a late answer,
// or one after its request ended, is never delivered. Must not touch the
// request it may serve.
#pragma once

#include "ngx.hpp"
#include "store.hpp"

namespace idem {

class StoreCall {
public:
    using Timeout = void (*)(void* data);

    // The operation is abandoned before `on_timeout` runs (nullptr: never a deadline).
    void init(Timeout on_timeout, void* data, ngx_log_t* log) noexcept;
    // Whoever awaits lives in `pool`; false when out of memory.
    bool bind(ngx_pool_t* pool) noexcept;

    // timeout_ms 0: as long as the store takes. False when the store could
    // not be reached.
    bool await(LiveStore* store, LiveOp* op, ngx_msec_t timeout_ms) noexcept;
    bool await(OperatorStore* store, PeekOp* op, ngx_msec_t timeout_ms) noexcept;
    // Called first by the operation's callback.
    void answered() noexcept;
    // Harmless when idle.
    void abandon() noexcept;

    bool pending() const noexcept { return op_ != nullptr; }

private:
    static void on_deadline(ngx_event_t* ev);
    static void on_pool_gone(void* data);
    bool arm(void* op, bool peek, ngx_msec_t timeout_ms) noexcept;

    // the store that abandons op_ (peek_: the operator's)
    LiveStore* live_store_ = nullptr;
    OperatorStore* operator_store_ = nullptr;
    void* op_ = nullptr;
    bool peek_ = false;
    Timeout on_timeout_ = nullptr;
    void* data_ = nullptr;
    ngx_event_t timer_{};
};

}  // namespace idem
