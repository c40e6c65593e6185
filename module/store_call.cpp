// store_call.cpp — see store_call.hpp.

#include "store_call.hpp"

namespace idem {

void StoreCall::init(Timeout on_timeout, void* data, ngx_log_t* log) noexcept
{
    on_timeout_ = on_timeout;
    data_ = data;
    set_event(timer_, on_deadline, this, log);
}

bool StoreCall::bind(ngx_pool_t* pool) noexcept
{
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == nullptr) {
        return false;
    }
    cln->handler = on_pool_gone;
    cln->data = this;
    return true;
}

bool StoreCall::arm(void* op, bool peek, ngx_msec_t timeout_ms) noexcept
{
    if (op == nullptr) {
        return false;
    }
    op_ = op;
    peek_ = peek;
    if (timeout_ms != 0) {
        ngx_add_timer(&timer_, timeout_ms);
    }
    return true;
}

bool StoreCall::await(LiveStore* store, LiveOp* op, ngx_msec_t timeout_ms) noexcept
{
    if (op != nullptr) {
        live_store_ = store;
    }
    return arm(op, false, timeout_ms);
}

bool StoreCall::await(OperatorStore* store, PeekOp* op, ngx_msec_t timeout_ms) noexcept
{
    if (op != nullptr) {
        operator_store_ = store;
    }
    return arm(op, true, timeout_ms);
}

void StoreCall::answered() noexcept
{
    op_ = nullptr;
    if (timer_.timer_set) {
        ngx_del_timer(&timer_);
    }
}

void StoreCall::abandon() noexcept
{
    if (op_ != nullptr) {
        if (peek_) {
            operator_store_->peek_abandon(static_cast<PeekOp*>(op_));
        } else {
            live_store_->live_abandon(static_cast<LiveOp*>(op_));
        }
    }
    answered();
}

void StoreCall::on_deadline(ngx_event_t* ev)
{
    auto* call = static_cast<StoreCall*>(ev->data);
    call->abandon();
    if (call->on_timeout_ != nullptr) {
        call->on_timeout_(call->data_);
    }
}

void StoreCall::on_pool_gone(void* data)
{
    static_cast<StoreCall*>(data)->abandon();
}

}  // namespace idem
