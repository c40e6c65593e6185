// redis/kept_stores.cpp — ScriptCalls' part for a response Redis refused for
// memory: its claim kept for idempotency_ttl, its record held within the
// oom buffer or replaced by the marker, retried until it lands or that life
// ends. Each attempt is the fenced script behind a renewal: nothing executes
// again, nothing but this claim is overwritten. Knows nothing of the request.
// See docs/design.md#a-full-redis.

#include "../conf.hpp"
#include "../metrics.hpp"
#include "script_calls.hpp"

namespace idem::redis {
namespace {

// Per worker, across every Redis deployment.
HoldBudget held_records;

}  // namespace

void set_oom_buffer(std::size_t bytes) noexcept
{
    held_records.set_limit(bytes);
}

// Marker only: the key then answers 410 once Redis takes writes, rather than
// 409 until its claim expires.
void ScriptCalls::keep(ScriptCall* store) noexcept
{
    std::string_view key = key_of(store);
    std::size_t size = store->args.len[store_record_arg];
    store->kept_until = ngx_current_msec + store->ttl_ms;
    count(Counter::stores_kept_for_memory);
    if (held_records.take(size)) {
        store->kept = Kept::record;
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: Redis %V is out of memory and refused the response for \"%*s\": its claim is "
                      "kept for idempotency_ttl (%uL ms), so that no retry executes the request again, and the "
                      "store is tried again until Redis takes writes (%uz bytes held; %uz of the worker's "
                      "idempotency_redis_oom_buffer of %uz)",
                      &server_.name, key.size(), key.data(), store->ttl_ms, size, held_records.held(),
                      held_records.limit());
    } else {
        store->kept = Kept::marker;
        store->record = RecordBytes{};  // freed now
        store->notice.tell(StoreOutcome::not_stored);  // the record itself never lands now
        store->notice = {};
        store->args.arg[store_record_arg] = store->marker.data();
        store->args.len[store_record_arg] = store->marker.size();
        count(Counter::oom_markers);
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: Redis %V is out of memory and refused the response for \"%*s\": its claim is "
                      "kept for idempotency_ttl (%uL ms), so that no retry executes the request again; the "
                      "worker's idempotency_redis_oom_buffer holds %uz of %uz bytes, so the response (%uz bytes) "
                      "is let go, and the unreplayable marker is stored in its place once Redis takes writes "
                      "(its retries then get 410)",
                      &server_.name, key.size(), key.data(), store->ttl_ms, held_records.held(),
                      held_records.limit(), size);
    }
    keep_claim(store);
}

// PEXPIRE needs no memory and goes ahead of each attempt. Always the script:
// a conditional SET refused while full and resent as the script would land
// behind its store and, after a failover that brought the claim back, keep
// it for the rest of idempotency_ttl (model/README.md, keep-ifeq-loss).
void ScriptCalls::keep_claim(ScriptCall* store) noexcept
{
    std::uint64_t left = kept_life_left(store->kept_until, ngx_current_msec);
    renew(key_of(store), store->args[1], left > 0 ? left : 1, Role::keepalive, nullptr, Words::script);
}

void ScriptCalls::release_held(ScriptCall* call) noexcept
{
    if (call->kept == Kept::record) {
        held_records.give_back(call->args.len[store_record_arg]);
    }
}

void ScriptCalls::park(ScriptCall* store) noexcept
{
    unpark(store);  // at the tail, once
    ngx_queue_insert_tail(&parked_, &store->parked);
    if (!probe_.timer_set) {
        ngx_add_timer(&probe_, static_cast<ngx_msec_t>(oom_probe_interval_ms));
    }
}

void ScriptCalls::unpark(ScriptCall* store) noexcept
{
    if (store->parked.prev != &store->parked) {
        ngx_queue_remove(&store->parked);
        ngx_queue_init(&store->parked);
    }
}

void ScriptCalls::attempt_kept(ScriptCall* store) noexcept
{
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: attempt %ui to %s for \"%*s\", kept for memory",
                   static_cast<ngx_uint_t>(store->retry.failures + 1), store->script->purpose, key_of(store).size(),
                   key_of(store).data());
    keep_claim(store);
    send(store);
}

// Each that lands lets as many more go, so all go within a few round trips;
// one refused again waits for the probe.
void ScriptCalls::send_parked(std::size_t count) noexcept
{
    for (std::size_t i = 0; i < count && !ngx_queue_empty(&parked_); i++) {
        auto* store = ngx_queue_data(ngx_queue_head(&parked_), ScriptCall, parked);
        unpark(store);
        attempt_kept(store);
    }
    if (ngx_queue_empty(&parked_) && probe_.timer_set) {
        ngx_del_timer(&probe_);
    }
}

void ScriptCalls::on_probe(ngx_event_t* ev)
{
    static_cast<ScriptCalls*>(ev->data)->probe();
}

// An exiting worker abandons stores past their window or
// worker_shutdown_timeout, so a reload never waits a day for Redis to have room.
void ScriptCalls::probe() noexcept
{
    ngx_msec_t now = ngx_current_msec;
    bool exiting = ngx_exiting || ngx_quit;
    bool shutdown_over = exiting && past_exit_deadline();
    for (ngx_queue_t* q = ngx_queue_head(&parked_); q != ngx_queue_sentinel(&parked_);) {
        auto* store = ngx_queue_data(q, ScriptCall, parked);
        q = ngx_queue_next(q);
        if (kept_life_left(store->kept_until, now) == 0) {
            give_up(store);
        } else if (shutdown_over
                   || (exiting && now - store->retry.started >= retry_window_ms(store->lock_ttl_ms, true))) {
            abandon(store);
        }
    }
    send_parked(1);
    if (!ngx_queue_empty(&parked_) && !probe_.timer_set) {
        ngx_add_timer(&probe_, static_cast<ngx_msec_t>(oom_probe_interval_ms));
    }
}

}  // namespace idem::redis
