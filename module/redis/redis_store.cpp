// redis/redis_store.cpp — see redis_store.hpp.

#include "redis_store.hpp"

#include <hiredis/hiredis.h>

#include <cstring>
#include <new>

#include "../metrics.hpp"
#include "replies.hpp"
#include "retry.hpp"
#include "scripts.hpp"
#include "router.hpp"

namespace idem {

namespace redis {
namespace {

constexpr int max_script_args = 6;
constexpr std::uint64_t default_lock_ttl_ms = 30000;  // idempotency_lock_ttl's default

class RedisStore;

// What a script call is for. A response to store, a key to release and a
// claim to put back are owed: the store tries them again after a transient
// failure, and an exit that leaves them undone is logged and counted. A
// renewal by a running request is sent again after a lost reply; a renewal
// that keeps the claim of a response being stored again is fire and
// forget, and silent.
enum class Role { store, release, restore, renewal, keepalive };

constexpr bool owed(Role role) noexcept
{
    return role == Role::store || role == Role::release || role == Role::restore;
}

// A fenced script call; owns copies of its arguments so it can be sent
// again: as EVAL after NOSCRIPT, after a lost reply, after a transient
// error. Linked in its store's list from creation to finish.
struct ScriptCall {
    RedisStore* store;
    Script* script;
    Role role;
    ScriptCall* prev;
    ScriptCall* next;
    ngx_event_t retry_timer;  // the next attempt
    Retry retry;
    std::uint64_t lock_ttl_ms;
    size_t error_len;
    char error[80];  // why the last attempt failed, for the line that gives up
    bool with_body;  // EVAL instead of EVALSHA, after NOSCRIPT
    bool leased;     // a store within the claim's lease: SET ... XX GET instead of the script
    OwnedArgs<max_script_args> args;  // KEYS[1], then ARGV
};

class RedisStore final : public Store {
public:
    RedisStore(const RedisServer& server, Router* router, ngx_log_t* log) noexcept
        : server_(server), router_(router), log_(log)
    {
    }

    // Worker exit. A graceful exit waited for what was owed Redis (the
    // retry timers of stores and releases are not cancelable) up to its
    // window or worker_shutdown_timeout; what is left now — in flight, or
    // after a fast shutdown — gets no reply when the router closes its
    // connections and is abandoned (logged and counted); its claim is no
    // longer renewed and expires within idempotency_lock_ttl.
    ~RedisStore() override
    {
        closing_ = true;
        delete router_;
        while (calls_ != nullptr) {
            abandon(calls_);
        }
    }
    RedisStore(const RedisStore&) = delete;
    RedisStore& operator=(const RedisStore&) = delete;

    Router& router() noexcept { return *router_; }

    PendingOp* claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                     const ClaimWaiter& waiter) noexcept override
    {
        PendingOp* op = new_pending(this, key, claim, lock_ttl_ms, waiter, log_);
        if (op == nullptr) {
            return nullptr;
        }
        note_lock_ttl(lock_ttl_ms);
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(lock_ttl_ms, ttl);
        const char* argv[] = {"SET", op->args.arg[0], op->args.arg[1], "NX", "PX", ttl, "GET"};
        const size_t lens[] = {3, key.size(), claim.size(), 2, 2, ttl_len, 3};
        if (!router_->command(key, 7, argv, lens, on_claim_reply, op)) {
            ngx_free(op);
            return nullptr;
        }
        return op;
    }

    void abandon(PendingOp* op) noexcept override { op->waiter.callback = nullptr; }

    // Within the claim's lease (lease.hpp) a response goes out as
    // `SET key record PX ttl XX GET`: two plain commands per new key instead
    // of one and a script. Any attempt after the first is the fenced script.
    void complete(std::string_view key, std::string_view claim, std::string_view record, std::uint64_t ttl_ms,
                  std::uint64_t lock_ttl_ms, bool within_lease) noexcept override
    {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(ttl_ms, ttl);
        std::string_view args[] = {key, claim, record, {ttl, ttl_len}};
        call(complete_script, Role::store, args, 4, lock_ttl_or_longest(lock_ttl_ms), within_lease);
    }

    void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept override
    {
        std::string_view args[] = {key, claim};
        call(release_script, Role::release, args, 2, lock_ttl_or_longest(lock_ttl_ms));
    }

    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept override
    {
        note_lock_ttl(lock_ttl_ms);
        renew(key, claim, lock_ttl_ms, Role::renewal);
    }

private:
    static size_t decimal(std::uint64_t n, char* out) noexcept
    {
        return static_cast<size_t>(ngx_sprintf(reinterpret_cast<u_char*>(out), "%uL", n) - reinterpret_cast<u_char*>(out));
    }

    void note_lock_ttl(std::uint64_t lock_ttl_ms) noexcept
    {
        if (lock_ttl_ms > longest_lock_ttl_) {
            longest_lock_ttl_ = lock_ttl_ms;
        }
    }

    std::uint64_t lock_ttl_or_longest(std::uint64_t lock_ttl_ms) const noexcept
    {
        if (lock_ttl_ms != 0) {
            return lock_ttl_ms;
        }
        return longest_lock_ttl_ != 0 ? longest_lock_ttl_ : default_lock_ttl_ms;
    }

    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Role role) noexcept
    {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(lock_ttl_ms, ttl);
        std::string_view args[] = {key, claim, {ttl, ttl_len}};
        call(renew_script, role, args, 3, lock_ttl_ms);
    }

    static std::string_view key_of(const ScriptCall* call) noexcept { return call->args[0]; }

    void call(Script& script, Role role, const std::string_view* args, int argc, std::uint64_t lock_ttl_ms,
              bool leased = false) noexcept
    {
        if (closing_) {
            return;  // worker exit: nothing new is sent
        }
        auto* call = new_with_args<ScriptCall>(args, argc, log_);
        if (call == nullptr) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: out of memory, cannot %s", script.purpose);
            if (owed(role)) {
                count(role == Role::release ? Counter::abandoned_releases : Counter::abandoned_stores);
            }
            return;
        }
        call->store = this;
        call->script = &script;
        call->role = role;
        call->lock_ttl_ms = lock_ttl_ms;
        call->leased = leased;
        // What is owed Redis keeps an exiting worker (reload, graceful
        // shutdown) alive until it lands or its window ends, no longer than
        // worker_shutdown_timeout when that is set (see failed()).
        set_event(call->retry_timer, on_retry_timer, call, log_, !owed(role));
        call->next = calls_;
        if (calls_ != nullptr) {
            calls_->prev = call;
        }
        calls_ = call;
        send(call);
    }

    // EVALSHA sha 1 KEY ARGV...  (or EVAL body 1 KEY ARGV... once NOSCRIPT was
    // seen); a leased store: SET KEY record PX ttl XX GET.
    void send(ScriptCall* call) noexcept
    {
        if (call->leased) {
            const OwnedArgs<max_script_args>& a = call->args;
            const char* argv[] = {"SET", a.arg[0], a.arg[2], "PX", a.arg[3], "XX", "GET"};
            const size_t lens[] = {3, a.len[0], a.len[2], 2, a.len[3], 2, 3};
            if (!router_->command(key_of(call), 7, argv, lens, on_script_reply, call, true)) {
                failed(call, "Redis cannot be reached");
            }
            return;
        }
        bool with_body = call->with_body;
        const char* argv[3 + max_script_args];
        size_t lens[3 + max_script_args];
        argv[0] = with_body ? "EVAL" : "EVALSHA";
        lens[0] = with_body ? 4 : 7;
        argv[1] = with_body ? call->script->body.data() : call->script->sha1;
        lens[1] = with_body ? call->script->body.size() : 40;
        argv[2] = "1";
        lens[2] = 1;
        for (int i = 0; i < call->args.count; i++) {
            argv[3 + i] = call->args.arg[i];
            lens[3 + i] = call->args.len[i];
        }
        if (!router_->command(key_of(call), 3 + call->args.count, argv, lens, on_script_reply, call, true)) {
            failed(call, "Redis cannot be reached");
        }
    }

    // This attempt did not do it, and another may: a lost reply (a fenced
    // script may run twice), or an error reply that says "not now". The
    // next one is sent after a backoff, within the call's window; a
    // response renews its claim before each one.
    void failed(ScriptCall* call, std::string_view why) noexcept
    {
        call->leased = false;  // the lease may be over by the next attempt: the script decides
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

    static void on_retry_timer(ngx_event_t* ev)
    {
        auto* call = static_cast<ScriptCall*>(ev->data);
        RedisStore* self = call->store;
        if (call->role == Role::store) {
            // Ahead of the store on the same connection: the claim lives
            // another lock_ttl, whatever this attempt meets.
            self->renew(key_of(call), call->args[1], call->lock_ttl_ms, Role::keepalive);
        }
        self->send(call);
    }

    void give_up(ScriptCall* call) noexcept
    {
        std::string_view key = key_of(call);
        ngx_log_error(NGX_LOG_ERR, log_, 0,
                      "idempotency: gave up trying to %s for \"%*s\" on Redis %V after %ui attempts in %M ms: %*s",
                      call->script->purpose, key.size(), key.data(), &server_.name,
                      static_cast<ngx_uint_t>(call->retry.failures),
                      static_cast<ngx_msec_t>(ngx_current_msec - call->retry.started), call->error_len, call->error);
        count_abandoned(call);
        finish(call);
    }

    void abandon(ScriptCall* call) noexcept
    {
        if (owed(call->role)) {
            std::string_view key = key_of(call);
            ngx_log_error(NGX_LOG_ERR, log_, 0,
                          "idempotency: the worker exits before it could %s for \"%*s\" on Redis %V",
                          call->script->purpose, key.size(), key.data(), &server_.name);
            count_abandoned(call);
        }
        finish(call);
    }

    static void count_abandoned(const ScriptCall* call) noexcept
    {
        if (call->role == Role::store || call->role == Role::restore) {
            count(Counter::abandoned_stores);
        } else if (call->role == Role::release) {
            count(Counter::abandoned_releases);
        }
    }

    void finish(ScriptCall* call) noexcept
    {
        if (call->retry_timer.timer_set) {
            ngx_del_timer(&call->retry_timer);
        }
        (call->prev ? call->prev->next : calls_) = call->next;
        if (call->next != nullptr) {
            call->next->prev = call->prev;
        }
        ngx_free(call);
    }

    static void on_claim_reply(void* data, redisReply* reply)
    {
        auto* op = static_cast<PendingOp*>(data);
        auto* self = static_cast<RedisStore*>(op->store);
        std::string_view found;
        ClaimReply kind = read_claim_reply(reply, found);
        bool lost = reply == nullptr;

        if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the claim: %s",
                          &self->server_.name, reply->str);
        }
        const ClaimWaiter& waiter = op->waiter;
        if (self->closing_) {
            // Worker exit: nobody is answered; a claim that may have been
            // granted expires within its lock_ttl.
        } else if (waiter.callback != nullptr) {
            // Also while the worker exits gracefully: the request is still
            // there and holds the operation until it is answered.
            if (kind == ClaimReply::found) {
                waiter.answer_found(op->key(), found, self->log_);
            } else {
                waiter.answer(kind == ClaimReply::granted ? Outcome::fresh : Outcome::unavailable);
            }
            if (lost) {
                self->release(op->key(), op->claim(), op->lock_ttl_ms);  // it may have been granted: free it once Redis answers
            }
        } else if (lost || kind == ClaimReply::granted) {
            // Nobody waits for this claim any more, and it may be ours.
            ngx_log_error(NGX_LOG_INFO, self->log_, 0, "idempotency: releasing a claim whose requester stopped waiting");
            self->release(op->key(), op->claim(), op->lock_ttl_ms);
        }
        ngx_free(op);
    }

    // The reply to a leased store: what the key held before.
    void leased_stored(ScriptCall* store, const redisReply* reply) noexcept
    {
        std::string_view key = key_of(store), found;
        switch (read_leased_store_reply(reply, store->args[1], store->args[2], found)) {
        case LeasedStore::stored:
        case LeasedStore::unusable:  // not a reply SET ... GET gives: nothing more to learn
            break;
        case LeasedStore::gone:
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "idempotency: could not store the response: the claim had expired or was taken over");
            break;
        case LeasedStore::not_ours: {
            ngx_log_error(NGX_LOG_ERR, log_, 0,
                          "idempotency: the claim on \"%*s\" was not this request's when its response was stored "
                          "within the claim's lease (Redis lost the claim, or its clock ran ahead): putting back "
                          "what was there",
                          key.size(), key.data());
            char ttl[NGX_INT64_LEN];
            size_t ttl_len = decimal(store->lock_ttl_ms, ttl);
            std::string_view args[] = {key, store->args[2], found, {ttl, ttl_len}};
            call(restore_script, Role::restore, args, 4, store->lock_ttl_ms);
            break;
        }
        }
        finish(store);
    }

    static void on_script_reply(void* data, redisReply* reply)
    {
        auto* call = static_cast<ScriptCall*>(data);
        RedisStore* self = call->store;
        Script& script = *call->script;
        std::string_view key = key_of(call);

        if (self->closing_) {
            self->abandon(call);
            return;
        }
        if (reply == nullptr) {
            // The connection went down with this command unanswered; the
            // script is fenced, so running it again is safe.
            self->failed(call, "the connection was lost");
            return;
        }
        if (call->leased && reply->type != REDIS_REPLY_ERROR) {
            self->leased_stored(call, reply);
            return;
        }
        if (reply->type == REDIS_REPLY_ERROR) {
            std::string_view error{reply->str, reply->len};
            if (error.substr(0, 8) == "NOSCRIPT" && !call->with_body) {
                call->with_body = true;  // EVAL loads the script for the EVALSHAs after it
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
        } else if (call->role == Role::restore) {
            // The leased store took another request's claim; the log says
            // what became of it, as for any store that lost its claim.
            ngx_log_error(NGX_LOG_WARN, self->log_, 0,
                          "idempotency: could not store the response: the claim had expired or was taken over; "
                          "%s", reply->type == REDIS_REPLY_INTEGER && reply->integer == 1
                                    ? "the other claim is back" : "the key has moved on since");
        } else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
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

    const RedisServer& server_;
    Router* router_;
    ngx_log_t* log_;
    ScriptCall* calls_ = nullptr;  // every call not finished: in flight, or waiting for its next attempt
    std::uint64_t longest_lock_ttl_ = 0;
    bool closing_ = false;
};

RedisStore** worker_stores = nullptr;
ngx_uint_t worker_store_count = 0;
const RedisServer* const* worker_servers = nullptr;

}  // namespace

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept
{
    if (conf.servers.nelts == 0) {
        return NGX_OK;
    }
    if (!digest_scripts()) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "idempotency: SHA-1 of the Redis scripts failed");
        return NGX_ERROR;
    }
    worker_stores = static_cast<RedisStore**>(ngx_calloc(conf.servers.nelts * sizeof(RedisStore*), cycle->log));
    if (worker_stores == nullptr) {
        return NGX_ERROR;
    }
    worker_store_count = conf.servers.nelts;
    worker_servers = static_cast<const RedisServer* const*>(conf.servers.elts);
    return NGX_OK;
}

void stop_worker_stores(ngx_cycle_t*) noexcept
{
    for (ngx_uint_t i = 0; i < worker_store_count; i++) {
        delete worker_stores[i];
    }
    ngx_free(worker_stores);
    worker_stores = nullptr;
    worker_store_count = 0;
}

Store* worker_store(const RedisServer& server, ngx_msec_t timeout) noexcept
{
    if (server.index >= worker_store_count) {
        return nullptr;
    }
    RedisStore*& store = worker_stores[server.index];
    if (store == nullptr) {
        const RedisServer& configured = *worker_servers[server.index];
        Router* router = make_router(configured, ngx_cycle->log);
        store = router ? new (std::nothrow) RedisStore(configured, router, ngx_cycle->log) : nullptr;
        if (store == nullptr) {
            delete router;
            return nullptr;
        }
    }
    store->router().set_timeout(timeout);
    return store;
}

}  // namespace redis
}  // namespace idem
