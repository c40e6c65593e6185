// redis/kept_stores.cpp — the part of ScriptCalls (script_calls.hpp) for a
// response Redis refused for memory (OOM): its claim kept for
// idempotency_ttl from that refusal (extending a key needs no memory); its
// record held within the worker's idempotency_redis_oom_buffer or, past
// it, let go for the unreplayable marker; its store waiting with the other
// kept ones until one of them, tried in turn once a second, lands — the
// rest then follow, two more for each that lands — or until its claim's
// extended life ends. Every attempt is the fenced script behind a renewal
// of the claim for what is left of that life: nothing is executed again,
// nothing but this claim is overwritten. Knows nothing of the request,
// which is gone by then.

#include "../conf.hpp"
#include "../metrics.hpp"
#include "script_calls.hpp"

namespace idem::redis {
namespace {

// Per worker: the record bytes its stores of every Redis deployment hold.
HoldBudget held_records;

}  // namespace

void set_oom_buffer(std::size_t bytes) noexcept
{
    held_records.set_limit(bytes);
}

// The first refusal for memory: the claim lives idempotency_ttl from now,
// and the store holds its record if the worker's budget has room for it,
// else only the marker — the key then answers 410 once Redis takes writes,
// rather than 409 until its claim expires.
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

// The claim lives until its extended life ends, not longer: the script's
// PEXPIRE needs no memory, and goes ahead of each attempt on the same
// connection. The script on every server: a conditional SET, refused
// while Redis is full and sent again as the script, would land behind its
// store, and after a failover that brought the claim back, keep that
// claim for what is left of idempotency_ttl (model/README.md, keep-ifeq-loss).
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

// Redis took a response: the next `count` kept stores go now, each behind
// its claim's renewal. Each of those that lands lets as many more go, so
// once Redis takes writes again every kept store is sent within a few
// round trips; one that is refused again waits for the probe, and sends
// nothing more.
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

// Once a second while stores are kept: those whose claim's extended life
// is over give up (the claim expires with it); an exiting worker abandons
// those past the window any store gets (idempotency_lock_ttl, at least
// 20 s) or past worker_shutdown_timeout, so a reload never waits for
// Redis to have room for a day; then the oldest left is tried.
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
