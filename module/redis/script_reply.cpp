// redis/script_reply.cpp — what a script call's reply says and what the call
// does on it: a store's outcome, what a leased store overwrote and whether
// it is put back, a lease revoked by a claim found gone; NOSCRIPT, an OOM'd
// conditional renewal and transient errors become another attempt. Must not
// touch how attempts are sent, retried or kept, nor their words.
// See docs/design.md#the-lease.

#include "script_calls.hpp"

#include <hiredis/hiredis.h>

#include "../conf.hpp"
#include "replies.hpp"

namespace idem::redis {

// As the fenced scripts answer (scripts.cpp): 1 done (or already), 0 the
// claim was not there, -1 no such answer.
long long ScriptCalls::answer_of(const ScriptCall* call, const redisReply* reply) noexcept
{
    if (call->form != Form::conditional) {
        return reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    }
    switch (call->role) {
    case Role::store:
        return read_conditional_store(reply, call->args[1], call->args[2]);
    case Role::renewal:
    case Role::keepalive:
        return read_conditional_renewal(reply);
    case Role::release:
        return read_conditional_release(reply, call->retry.failures > 0);
    case Role::restore:
        break;
    }
    return -1;
}

void ScriptCalls::leased_stored(ScriptCall* store, const redisReply* reply) noexcept
{
    std::string_view key = key_of(store);
    LeasedStoreReply r = read_leased_store_reply(reply, store->args[1], store->args[2]);
    store->outcome = r.what == LeasedStore::gone || r.what == LeasedStore::not_ours ? StoreOutcome::not_stored
                     : r.what == LeasedStore::unusable ? StoreOutcome::unknown : StoreOutcome::stored;  // ours stays
    switch (r.what) {
    case LeasedStore::stored:
        break;
    case LeasedStore::unusable:
        ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis %V gave an unexpected reply to the store of \"%*s\"",
                      &server_.name, key.size(), key.data());
        break;
    case LeasedStore::gone:
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "idempotency: could not store the response: the claim had expired or was taken over");
        break;
    case LeasedStore::same_intent:
        // Redis lost the claim and a request of the same fingerprint stored:
        // either response is a true replay.
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: the claim on \"%*s\" was lost by Redis while its request ran, and another "
                      "request of the same key and fingerprint executed and stored its response; this response "
                      "replaces it", key.size(), key.data());
        break;
    case LeasedStore::took_claim:
        // Not put back: that request's store finds the key taken and stores
        // nothing, so a claim put back would outlive it and its expiry let a
        // retry execute once more. Ours answers both requests' retries.
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: Redis lost the claim on \"%*s\" while its request ran, and another request "
                      "claimed the key; this response replaced that claim and stays: that request's store will "
                      "find the key taken, and its retries are answered from this response, or 422 - never "
                      "executed again",
                      key.size(), key.data());
        break;
    case LeasedStore::not_ours: {
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: the claim on \"%*s\" was not this request's when its response was stored "
                      "within the claim's lease (Redis lost the claim, or its clock ran ahead): putting back "
                      "what was there, with the expiry it had",
                      key.size(), key.data());
        char at[NGX_INT64_LEN];
        size_t at_len = r.expires_at >= 0 ? decimal(static_cast<std::uint64_t>(r.expires_at), at) : 0;
        std::string_view args[] = {key, store->args[2], r.found, {at, at_len}};
        call(restore_script, Role::restore, args, 4, store->lock_ttl_ms);
        break;
    }
    }
    finish(store);
}

void ScriptCalls::on_script_reply(void* data, redisReply* reply)
{
    auto* call = static_cast<ScriptCall*>(data);
    ScriptCalls* self = call->owner;
    Script& script = *call->script;
    std::string_view key = key_of(call);

    if (self->closing_) {
        self->abandon(call);
        return;
    }
    if (reply == nullptr) {
        // The script is fenced, so running it again is safe.
        self->failed(call, "the connection was lost");
        return;
    }
    if (call->role == Role::store && reply->type != REDIS_REPLY_ERROR) {
        self->send_parked(kept_stores_per_landing);  // Redis took a response: kept ones follow
    }
    if (call->form == Form::leased && reply->type != REDIS_REPLY_ERROR) {
        self->leased_stored(call, reply);
        return;
    }
    long long answer = answer_of(call, reply);
    if (call->role == Role::store && answer >= 0) {
        call->outcome = answer == 1 ? StoreOutcome::stored : StoreOutcome::not_stored;
    }
    if (reply->type != REDIS_REPLY_ERROR && answer < 0 && call->form == Form::conditional) {
        if (call->role != Role::keepalive) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V gave an unexpected reply to %s for \"%*s\"",
                          &self->server_.name, script.purpose, key.size(), key.data());
        }
    } else if (reply->type == REDIS_REPLY_ERROR) {
        std::string_view error{reply->str, reply->len};
        if (error.substr(0, 8) == "NOSCRIPT" && !call->with_body) {
            call->with_body = true;  // EVAL loads the script for the EVALSHAs after it
            self->send(call);
            return;
        }
        if (call->form == Form::conditional && (call->role == Role::renewal || call->role == Role::keepalive)
            && is_out_of_memory(error)) {
            call->scripted = true;  // the script's PEXPIRE is not refused for memory (script_render.cpp)
            call->with_body = true;
            self->send(call);
            return;
        }
        if (call->role != Role::renewal && is_transient_error(error)) {
            self->failed(call, error);  // a running request renews again anyway
            return;
        }
        if (call->role != Role::keepalive) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused to %s for \"%*s\": %*s",
                          &self->server_.name, script.purpose, key.size(), key.data(), error.size(), error.data());
        }
        call->outcome = StoreOutcome::not_stored;
    } else if (call->role == Role::restore) {
        // The leased store overwrote another request's stored response or marker.
        ngx_log_error(NGX_LOG_WARN, self->log_, 0,
                      "idempotency: could not store the response: the claim had expired or was taken over; "
                      "%s", answer == 1 ? "what was there is back" : "the key has moved on since");
    } else if (answer == 0) {
        if (call->lease != nullptr && (call->role == Role::renewal || call->role == Role::keepalive)) {
            // Redis lost it: the lease's argument no longer holds.
            call->lease->revoke();
        }
        if (call->role != Role::keepalive) {
            ngx_log_error(NGX_LOG_WARN, self->log_, 0,
                          "idempotency: could not %s: the claim had expired or was taken over", script.purpose);
        }
    } else if (call->retry.failures > 0 && call->role != Role::keepalive && call->role != Role::renewal) {
        ngx_log_error(NGX_LOG_WARN, self->log_, 0, "idempotency: attempt %ui to %s for \"%*s\" on Redis %V succeeded",
                      static_cast<ngx_uint_t>(call->retry.failures + 1), script.purpose, key.size(), key.data(),
                      &self->server_.name);
    }
    self->finish(call);
}

}  // namespace idem::redis
