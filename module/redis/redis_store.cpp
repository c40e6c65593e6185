// redis/redis_store.cpp — see redis_store.hpp.

#include "redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include <cstring>
#include <new>

#include "router.hpp"

namespace idem {

// A claim in flight. Keeps copies of the key and claim record so that a
// claim granted after its request stopped waiting can still be released.
struct PendingOp {
    Store* store;
    ClaimWaiter waiter;
    size_t key_len;
    size_t claim_len;
    char bytes[1];  // key, then claim
};

namespace redis {
namespace {

struct Script {
    std::string_view body;
    const char* purpose;
    char sha1[41];
};

// ARGV[1] is the claim record: only its holder may store or release. Each
// script also answers 1 when its work is already done, so that sending it
// again after a lost reply (its first run may have happened) is not
// mistaken for a lost claim.
Script complete_script{
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end "
    "if v == ARGV[2] then return 1 end return 0",
    "store the response", {}};

Script release_script{
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end "
    "if v == false then return 1 end return 0",
    "release the key", {}};

Script renew_script{
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    "renew the claim", {}};

bool compute_sha1(Script& script) noexcept
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_Digest(script.body.data(), script.body.size(), md, &md_len, EVP_sha1(), nullptr) != 1 || md_len != 20) {
        return false;
    }
    to_hex(md, 20, script.sha1);
    script.sha1[40] = '\0';
    return true;
}

constexpr int max_script_args = 6;
constexpr int max_resends = 20;  // reconnect attempts, with backoff: ~20 s of outage

class RedisStore;

// A fenced script call; owns copies of its arguments so it can be sent
// again: as EVAL after NOSCRIPT, or after a reconnect when its reply was lost.
struct ScriptCall {
    RedisStore* store;
    Script* script;
    int argc;  // script arguments: KEYS[1], then ARGV
    int resends;
    bool with_body;  // EVAL instead of EVALSHA, after NOSCRIPT
    size_t len[max_script_args];
    char* arg[max_script_args];
    char bytes[1];
};

class RedisStore final : public Store {
public:
    RedisStore(const RedisServer& server, Router* router, ngx_log_t* log) noexcept
        : server_(server), router_(router), log_(log)
    {
    }
    ~RedisStore() override { delete router_; }
    RedisStore(const RedisStore&) = delete;
    RedisStore& operator=(const RedisStore&) = delete;

    Router& router() noexcept { return *router_; }

    PendingOp* claim(std::string_view key, std::string_view claim, const Digest& fingerprint,
                     std::uint64_t lock_ttl_ms, const SecretKey* keys, std::size_t key_count,
                     ClaimCallback callback, void* data) noexcept override
    {
        auto* op = static_cast<PendingOp*>(ngx_alloc(sizeof(PendingOp) + key.size() + claim.size(), log_));
        if (op == nullptr) {
            return nullptr;
        }
        op->store = this;
        op->waiter = {callback, data, fingerprint, keys, key_count};
        op->key_len = key.size();
        op->claim_len = claim.size();
        std::memcpy(op->bytes, key.data(), key.size());
        std::memcpy(op->bytes + key.size(), claim.data(), claim.size());

        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(lock_ttl_ms, ttl);
        const char* argv[] = {"SET", op->bytes, op->bytes + key.size(), "NX", "PX", ttl, "GET"};
        const size_t lens[] = {3, key.size(), claim.size(), 2, 2, ttl_len, 3};
        if (!router_->command(key, 7, argv, lens, on_claim_reply, op)) {
            ngx_free(op);
            return nullptr;
        }
        return op;
    }

    void abandon(PendingOp* op) noexcept override { op->waiter.callback = nullptr; }

    void complete(std::string_view key, std::string_view claim, std::string_view record,
                  std::uint64_t ttl_ms) noexcept override
    {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(ttl_ms, ttl);
        std::string_view args[] = {key, claim, record, {ttl, ttl_len}};
        call(complete_script, args, 4);
    }

    void release(std::string_view key, std::string_view claim) noexcept override
    {
        std::string_view args[] = {key, claim};
        call(release_script, args, 2);
    }

    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept override
    {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(lock_ttl_ms, ttl);
        std::string_view args[] = {key, claim, {ttl, ttl_len}};
        call(renew_script, args, 3);
    }

private:
    static size_t decimal(std::uint64_t n, char* out) noexcept
    {
        return static_cast<size_t>(ngx_sprintf(reinterpret_cast<u_char*>(out), "%uL", n) - reinterpret_cast<u_char*>(out));
    }

    void call(Script& script, const std::string_view* args, int argc) noexcept
    {
        size_t total = 0;
        for (int i = 0; i < argc; i++) {
            total += args[i].size();
        }
        auto* call = static_cast<ScriptCall*>(ngx_alloc(sizeof(ScriptCall) + total, log_));
        if (call == nullptr) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: out of memory, cannot %s", script.purpose);
            return;
        }
        call->store = this;
        call->script = &script;
        call->argc = argc;
        call->resends = 0;
        call->with_body = false;
        char* p = call->bytes;
        for (int i = 0; i < argc; i++) {
            call->arg[i] = p;
            call->len[i] = args[i].size();
            std::memcpy(p, args[i].data(), args[i].size());
            p += args[i].size();
        }
        send(call);
    }

    // EVALSHA sha 1 KEY ARGV...  (or EVAL body 1 KEY ARGV... once NOSCRIPT was seen)
    void send(ScriptCall* call) noexcept
    {
        bool with_body = call->with_body;
        const char* argv[3 + max_script_args];
        size_t lens[3 + max_script_args];
        argv[0] = with_body ? "EVAL" : "EVALSHA";
        lens[0] = with_body ? 4 : 7;
        argv[1] = with_body ? call->script->body.data() : call->script->sha1;
        lens[1] = with_body ? call->script->body.size() : 40;
        argv[2] = "1";
        lens[2] = 1;
        for (int i = 0; i < call->argc; i++) {
            argv[3 + i] = call->arg[i];
            lens[3 + i] = call->len[i];
        }
        if (!router_->command({call->arg[0], call->len[0]}, 3 + call->argc, argv, lens, on_script_reply, call, true)) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: cannot queue a command to %s on Redis %V",
                          call->script->purpose, &server_.name);
            ngx_free(call);
        }
    }

    static void on_claim_reply(void* data, redisReply* reply)
    {
        auto* op = static_cast<PendingOp*>(data);
        auto* self = static_cast<RedisStore*>(op->store);
        std::string_view key{op->bytes, op->key_len};
        std::string_view claim{op->bytes + op->key_len, op->claim_len};
        bool lost = reply == nullptr;
        bool granted = reply != nullptr && reply->type == REDIS_REPLY_NIL;

        if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the claim: %s",
                          &self->server_.name, reply->str);
        }
        const ClaimWaiter& waiter = op->waiter;
        if (waiter.callback != nullptr && !(lost && (ngx_exiting || ngx_terminate || ngx_quit))) {
            ClaimResult result{Decision::unavailable, {}};
            char* opened = nullptr;
            if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
                result.stored = {reply->str, reply->len};
                result.decision = waiter.judge(key, result.stored, opened, self->log_);
            } else {
                Record record;
                result.decision = decide(reply, waiter.fingerprint, record);
            }
            waiter.callback(waiter.data, result);
            ngx_free(opened);
            if (lost) {
                self->release(key, claim);  // it may have been granted: free it once Redis answers
            }
        } else if (lost || granted) {
            // Nobody waits for this claim any more, and it may be ours.
            ngx_log_error(NGX_LOG_INFO, self->log_, 0, "idempotency: releasing a claim whose requester stopped waiting");
            self->release(key, claim);
        }
        ngx_free(op);
    }

    static void on_script_reply(void* data, redisReply* reply)
    {
        auto* call = static_cast<ScriptCall*>(data);
        RedisStore* self = call->store;
        Script& script = *call->script;

        if (reply == nullptr) {
            // The connection went down with this command unanswered; the
            // script is fenced, so running it again is safe.
            if (call->resends++ < max_resends && !ngx_exiting && !ngx_terminate && !ngx_quit) {
                self->send(call);
                return;
            }
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: gave up trying to %s on Redis %V",
                          script.purpose, &self->server_.name);
        } else if (reply->type == REDIS_REPLY_ERROR && std::strncmp(reply->str, "NOSCRIPT", 8) == 0
                   && !call->with_body) {
            call->with_body = true;  // EVAL loads the script for the EVALSHAs after it
            self->send(call);
            return;
        } else if (reply->type == REDIS_REPLY_ERROR) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused to %s: %s",
                          &self->server_.name, script.purpose, reply->str);
        } else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
            ngx_log_error(NGX_LOG_WARN, self->log_, 0,
                          "idempotency: could not %s: the claim had expired or was taken over", script.purpose);
        }
        ngx_free(call);
    }

    const RedisServer& server_;
    Router* router_;
    ngx_log_t* log_;
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
    if (!compute_sha1(complete_script) || !compute_sha1(release_script) || !compute_sha1(renew_script)) {
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

Store* store_for(const RedisServer& server, ngx_msec_t timeout) noexcept
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
