// redis/script_calls.cpp — see script_calls.hpp.

#include "script_calls.hpp"

#include <cstring>
#include <utility>

#include "../conf.hpp"
#include "../metrics.hpp"
#include "../store.hpp"

namespace idem::redis {

// Counted from when the worker is first seen exiting; true past it.
bool past_exit_deadline() noexcept
{
    static ngx_msec_t deadline = 0;
    if (!ngx_exiting && !ngx_quit) {
        return false;
    }
    auto* ccf = reinterpret_cast<ngx_core_conf_t*>(ngx_get_conf(ngx_cycle->conf_ctx, ngx_core_module));
    if (ccf == nullptr || ccf->shutdown_timeout == 0 || ccf->shutdown_timeout == NGX_CONF_UNSET_MSEC) {
        return false;
    }
    if (deadline == 0) {
        deadline = ngx_current_msec + ccf->shutdown_timeout;
    }
    return ngx_current_msec >= deadline;
}

ScriptCalls::~ScriptCalls()
{
    closing_ = true;
    while (calls_ != nullptr) {
        abandon(calls_);
    }
    if (probe_.timer_set) {
        ngx_del_timer(&probe_);
    }
}

void ScriptCalls::renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Role role,
                        Lease* lease, Words words) noexcept
{
    if (closing_) {
        return;  // worker exit: nothing new is sent
    }
    char ttl[NGX_INT64_LEN];
    size_t ttl_len = decimal(lock_ttl_ms, ttl);
    std::string_view args[] = {key, claim, {ttl, ttl_len}};
    auto* call = new_with_args<ScriptCall>(args, 3, log_);
    if (call != nullptr) {
        call->scripted = words == Words::script;
    }
    start(call, renew_script, role, lock_ttl_ms, lease);
}

void ScriptCalls::call(Script& script, Role role, const std::string_view* args, int argc, std::uint64_t lock_ttl_ms,
                       Lease* lease) noexcept
{
    if (closing_) {
        return;  // worker exit: nothing new is sent
    }
    start(new_with_args<ScriptCall>(args, argc, log_), script, role, lock_ttl_ms, lease);
}

void ScriptCalls::store(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                        std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease, StoreNotice notice) noexcept
{
    if (closing_) {
        notice.tell(StoreOutcome::unknown);
        return;  // worker exit: nothing new is sent
    }
    // The record lies apart from the other arguments, so a store kept for
    // memory can let it go for its marker.
    if (!record.owns()) {
        std::string_view bytes = record.view();
        auto* copy = static_cast<char*>(ngx_alloc(ngx_max(bytes.size(), 1), log_));
        if (copy != nullptr && !bytes.empty()) {
            std::memcpy(copy, bytes.data(), bytes.size());
        }
        record = RecordBytes::owned(copy, {copy, copy != nullptr ? bytes.size() : 0});
    }
    std::string_view args[] = {key, claim, {}, ttl_text_.of(ttl_ms), marker};
    auto* call = record.owns() ? new_with_args<ScriptCall>(args, 5, log_) : nullptr;
    if (call == nullptr) {
        notice.tell(StoreOutcome::not_stored);
    } else {
        call->args.count = store_sent_args;
        call->marker = call->args[store_marker_arg];
        call->notice = notice;
        call->args.arg[store_record_arg] = record.view().data();
        call->args.len[store_record_arg] = record.view().size();
        call->record = std::move(record);
        call->ttl_ms = ttl_ms;
    }
    start(call, complete_script, Role::store, lock_ttl_ms, lease);
}

// nullptr: out of memory.
void ScriptCalls::start(ScriptCall* call, Script& script, Role role, std::uint64_t lock_ttl_ms, Lease* lease) noexcept
{
    if (call == nullptr) {
        ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: out of memory, cannot %s", script.purpose);
        if (owed(role)) {
            count(role == Role::release ? Counter::abandoned_releases : Counter::abandoned_stores);
        }
        return;
    }
    call->owner = this;
    call->script = &script;
    call->role = role;
    call->lock_ttl_ms = lock_ttl_ms;
    call->lease = hold_lease(lease);
    // A keepalive goes ahead of a store sent again, on a connection that may
    // drop with it: as EVAL it needs no NOSCRIPT round (whose EVAL would queue
    // behind the store and be lost with it).
    call->with_body = role == Role::keepalive;
    // What is owed keeps an exiting worker alive until it lands or its window
    // (at most worker_shutdown_timeout) ends.
    set_event(call->retry_timer, on_retry_timer, call, log_, !owed(role));
    ngx_queue_init(&call->parked);  // not parked: kept for memory, it waits there between attempts
    call->next = calls_;
    if (calls_ != nullptr) {
        calls_->prev = call;
    }
    calls_ = call;
    send(call);
}

void ScriptCalls::send(ScriptCall* call) noexcept
{
    if (!router_.command(key_of(call), 0, nullptr, nullptr, on_script_reply, call, true, Late{render, call})) {
        failed(call, "Redis cannot be reached");
    }
}

// A lost reply (a fenced script may run twice) or a "not now" error: retried
// after a backoff within the window, a response renewing its claim first;
// one refused for memory is kept instead (kept_stores.cpp).
void ScriptCalls::failed(ScriptCall* call, std::string_view why) noexcept
{
    call->form = Form::script;  // a store's attempts after the first are not leased
    if (call->role == Role::keepalive) {
        finish(call);  // the next attempt renews again
        return;
    }
    call->error_len = ngx_min(why.size(), sizeof(call->error));
    std::memcpy(call->error, why.data(), call->error_len);
    bool first = call->retry.failures == 0;
    bool keeps_claim = call->role == Role::store;
    std::uint64_t window = retry_window_ms(call->lock_ttl_ms, keeps_claim);
    std::uint64_t max_delay = keeps_claim ? renewing_max_delay_ms(call->lock_ttl_ms) : retry_max_delay_ms;
    std::uint64_t wait = 0;
    if (past_exit_deadline()) {
        abandon(call);
        return;
    }
    if (keeps_claim && (call->kept != Kept::no || is_out_of_memory(why))) {
        call->retry.count_failure(ngx_current_msec);
        if (call->kept == Kept::no) {
            keep(call);
        }
        park(call);
        return;
    }
    if (!call->retry.next(ngx_current_msec, window, max_delay, wait)) {
        give_up(call);
        return;
    }
    if (first && call->role != Role::renewal) {
        std::string_view key = key_of(call);
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "idempotency: cannot %s for \"%*s\" on Redis %V now: %*s; trying again for up to %M ms%s",
                      call->script->purpose, key.size(), key.data(), &server_.name, why.size(), why.data(),
                      static_cast<ngx_msec_t>(window), keeps_claim ? ", the claim kept alive" : "");
    }
    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: attempt %ui to %s for \"%*s\" in %M ms",
                   static_cast<ngx_uint_t>(call->retry.failures + 1), call->script->purpose, key_of(call).size(),
                   key_of(call).data(), static_cast<ngx_msec_t>(wait));
    ngx_add_timer(&call->retry_timer, static_cast<ngx_msec_t>(wait));
}

void ScriptCalls::on_retry_timer(ngx_event_t* ev)
{
    auto* call = static_cast<ScriptCall*>(ev->data);
    ScriptCalls* self = call->owner;
    if (call->role == Role::store) {
        // Ahead of the store on the same connection, whatever it meets.
        self->renew(key_of(call), call->args[1], call->lock_ttl_ms, Role::keepalive);
    }
    self->send(call);
}

void ScriptCalls::give_up(ScriptCall* call) noexcept
{
    std::string_view key = key_of(call);
    ngx_log_error(NGX_LOG_ERR, log_, 0,
                  "idempotency: gave up trying to %s for \"%*s\" on Redis %V after %ui attempts in %M ms: %*s",
                  call->script->purpose, key.size(), key.data(), &server_.name,
                  static_cast<ngx_uint_t>(call->retry.failures),
                  static_cast<ngx_msec_t>(ngx_current_msec - call->retry.started), call->error_len, call->error);
    if (call->kept != Kept::no) {
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: the claim on \"%*s\", kept for idempotency_ttl since Redis refused its "
                      "response for memory, expires now: a retry executes the request again, as after its record "
                      "had expired", key.size(), key.data());
    }
    count_abandoned(call);
    call->outcome = StoreOutcome::not_stored;
    finish(call);
}

void ScriptCalls::abandon(ScriptCall* call) noexcept
{
    if (owed(call->role)) {
        std::string_view key = key_of(call);
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: the worker exits before it could %s for \"%*s\" on Redis %V%s",
                      call->script->purpose, key.size(), key.data(), &server_.name,
                      call->kept != Kept::no ? ": its claim, kept for idempotency_ttl since Redis refused the "
                                               "response for memory, stays until then (retries get 409, never a "
                                               "second execution)" : "");
        count_abandoned(call);
    }
    finish(call);
}

void ScriptCalls::count_abandoned(const ScriptCall* call) noexcept
{
    if (call->role == Role::store || call->role == Role::restore) {
        count(Counter::abandoned_stores);
    } else if (call->role == Role::release) {
        count(Counter::abandoned_releases);
    }
}

void ScriptCalls::finish(ScriptCall* call) noexcept
{
    if (owed(call->role)) {
        store_settled(key_of(call));  // landed, refused or given up: its waiters look now
    }
    if (call->retry_timer.timer_set) {
        ngx_del_timer(&call->retry_timer);
    }
    unpark(call);
    release_held(call);
    (call->prev ? call->prev->next : calls_) = call->next;
    if (call->next != nullptr) {
        call->next->prev = call->prev;
    }
    drop_lease(call->lease);
    StoreNotice notice = call->notice;
    StoreOutcome outcome = call->outcome;
    delete_with_args(call);  // and the record it kept
    notice.tell(outcome);
}

}  // namespace idem::redis
