// redis/redis_store.cpp — see redis_store.hpp.

#include "redis_store.hpp"

#include <hiredis/hiredis.h>

#include <new>
#include <utility>

#include "pieces.hpp"
#include "replies.hpp"
#include "retry.hpp"
#include "router.hpp"
#include "script_calls.hpp"
#include "scripts.hpp"

namespace idem {

namespace redis {
namespace {

constexpr std::uint64_t default_lock_ttl_ms = 30000;  // idempotency_lock_ttl's default

class RedisStore final : public Store {
public:
    RedisStore(const RedisServer& server, Router* router, ngx_log_t* log) noexcept
        : server_(server), router_(router), log_(log), calls_(server, *router, log)
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
        calls_.close();
        delete router_;  // calls_ then abandons what is left
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
        std::string_view ttl = lock_ttl_text_.of(lock_ttl_ms);
        bool sent;
        if (waiter.fence) {
            // sent whole (EVAL): Redis keeps it compiled
            const char* argv[] = {"EVAL", fenced_claim_script.data(), "1", op->args.arg[0], op->args.arg[1], ttl.data()};
            const size_t lens[] = {4, fenced_claim_script.size(), 1, key.size(), claim.size(), ttl.size()};
            sent = router_->command(key, 6, argv, lens, on_claim_reply, op);
        } else {
            const char* argv[] = {"SET", op->args.arg[0], op->args.arg[1], "NX", "PX", ttl.data(), "GET"};
            const size_t lens[] = {3, key.size(), claim.size(), 2, 2, ttl.size(), 3};
            sent = router_->command(key, 7, argv, lens, on_claim_reply, op);
        }
        if (!sent) {
            ngx_free(op);
            return nullptr;
        }
        return op;
    }

    void abandon(PendingOp* op) noexcept override { op->waiter.callback = nullptr; }

    // If it leaves within the claim's lease (lease.hpp) a response goes out
    // as `MULTI; PEXPIRETIME; SET key record PX ttl XX GET; EXEC`: plain
    // commands instead of a script. Any attempt after the first, and one
    // that leaves past the lease, is the fenced script.
    void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                  std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease, StoreNotice notice) noexcept override
    {
        calls_.store(key, claim, std::move(record), marker, ttl_ms, lock_ttl_or_longest(lock_ttl_ms), lease, notice);
        Connection::send_queued();  // before the response's end goes on to the client
    }

    void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept override
    {
        std::string_view args[] = {key, claim};
        calls_.call(release_script, Role::release, args, 2, lock_ttl_or_longest(lock_ttl_ms));
        Connection::send_queued();  // before the answer that released it goes on to the client
    }

    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Lease* lease) noexcept override
    {
        note_lock_ttl(lock_ttl_ms);
        calls_.renew(key, claim, lock_ttl_ms, Role::renewal, lease);
    }

    // A live log's append is plain commands: the first `SET L bytes PX ttl`,
    // each later one `APPEND L bytes`, whose reply (the log's new length)
    // says whether it landed where it was to go; the renewals extend it. Its
    // read is `GETRANGE L at -1`, or, when it may be gone, a short script
    // sent whole (EVAL: Redis keeps it compiled, no NOSCRIPT round).
    LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                        LiveCallback callback, void* data) noexcept override
    {
        // the bytes are not kept with the operation: the command is made
        // from them now (the connection's pipeline holds them until they
        // are written; a Cluster or Sentinel router keeps its own copy for
        // a redirection)
        LiveOp* op = new_live_op(this, key, {}, callback, data, log_);
        if (op == nullptr) {
            return nullptr;
        }
        op->append = true;
        op->at = at + bytes.size();  // the length the log has once the append landed
        if (at == 0) {
            char ttl[NGX_INT64_LEN];
            size_t ttl_len = decimal(ttl_ms, ttl);
            const char* argv[] = {"SET", op->args.arg[0], bytes.data(), "PX", ttl, "NX"};
            const size_t lens[] = {3, key.size(), bytes.size(), 2, ttl_len, 2};
            return send_live(op, key, 6, argv, lens);
        }
        const char* argv[] = {"APPEND", op->args.arg[0], bytes.data()};
        const size_t lens[] = {6, key.size(), bytes.size()};
        return send_live(op, key, 3, argv, lens);
    }

    LiveOp* live_read(std::string_view key, std::uint64_t at, bool may_be_gone, LiveCallback callback,
                      void* data) noexcept override
    {
        LiveOp* op = new_live_op(this, key, {}, callback, data, log_);
        if (op == nullptr) {
            return nullptr;
        }
        op->may_be_gone = may_be_gone;
        char at_text[NGX_INT64_LEN];
        size_t at_len = decimal(at, at_text);
        if (may_be_gone) {
            const char* argv[] = {"EVAL", live_read_script.data(), "1", op->args.arg[0], at_text};
            const size_t lens[] = {4, live_read_script.size(), 1, key.size(), at_len};
            return send_live(op, key, 5, argv, lens);
        }
        const char* argv[] = {"GETRANGE", op->args.arg[0], at_text, "-1"};
        const size_t lens[] = {8, key.size(), at_len, 2};
        return send_live(op, key, 4, argv, lens);
    }

    void live_abandon(LiveOp* op) noexcept override { op->callback = nullptr; }

    void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept override
    {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(ttl_ms, ttl);
        const char* argv[] = {ttl_ms != 0 ? "PEXPIRE" : "DEL", key.data(), ttl};
        const size_t lens[] = {ttl_ms != 0 ? size_t{7} : size_t{3}, key.size(), ttl_len};
        router_->command(key, ttl_ms != 0 ? 3 : 2, argv, lens, on_ignored_reply, nullptr);
    }

    // The operator's plane: short scripts sent whole (EVAL), to the key's
    // node like every other command.
    PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept override
    {
        PeekOp* op = new_peek_op(this, key, {}, false, callback, data, log_);
        if (op == nullptr) {
            return nullptr;
        }
        const char* argv[] = {"EVAL", peek_script.data(), "1", op->args.arg[0]};
        const size_t lens[] = {4, peek_script.size(), 1, key.size()};
        return send_peek(op, key, 4, argv, lens);
    }

    PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback, void* data) noexcept override
    {
        PeekOp* op = new_peek_op(this, key, expected, true, callback, data, log_);
        if (op == nullptr) {
            return nullptr;
        }
        const char* argv[] = {"EVAL", purge_script.data(), "1", op->args.arg[0], op->args.arg[1]};
        const size_t lens[] = {4, purge_script.size(), 1, key.size(), expected.size()};
        return send_peek(op, key, 5, argv, lens);
    }

    void peek_abandon(PeekOp* op) noexcept override { op->callback = nullptr; }

    // The first piece's key is the script's key: the others share its slot.
    LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                        void* data) noexcept override
    {
        char first[max_piece_key_size];
        std::size_t first_size = write_piece_key(base, 0, first);
        LiveOp* op = new_live_op(this, {first, first_size}, {}, callback, data, log_);
        if (op == nullptr || count == 0) {
            ngx_free(op);
            return nullptr;
        }
        op->look = true;
        op->at = count;
        char count_text[NGX_INT64_LEN];
        char name_text[NGX_INT64_LEN];
        const char* argv[] = {"EVAL", pieces_look_script.data(), "1", op->args.arg[0], count_text, name_text};
        const size_t lens[] = {4, pieces_look_script.size(), 1, first_size, decimal(count, count_text),
                               decimal(piece_name_size, name_text)};
        return send_live(op, {first, first_size}, 6, argv, lens);
    }

private:
    PeekOp* send_peek(PeekOp* op, std::string_view key, int argc, const char** argv, const size_t* lens) noexcept
    {
        if (!router_->command(key, argc, argv, lens, on_peek_reply, op)) {
            ngx_free(op);
            return nullptr;
        }
        return op;
    }

    static void on_peek_reply(void* data, redisReply* reply)
    {
        auto* op = static_cast<PeekOp*>(data);
        auto* self = static_cast<RedisStore*>(op->store);
        if (op->callback != nullptr && !self->closing_) {
            LiveStatus status = LiveStatus::failed;
            std::string_view value;
            std::int64_t ttl = -1;
            if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
                ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the operator's %s: %s",
                              &self->server_.name, op->purge ? "purge" : "peek", reply->str);
            } else if (reply == nullptr) {
                // no reply: failed
            } else if (op->purge) {
                if (reply->type == REDIS_REPLY_INTEGER) {
                    status = reply->integer == 1 ? LiveStatus::done : LiveStatus::gone;
                }
            } else if (reply->type == REDIS_REPLY_NIL) {
                status = LiveStatus::gone;
            } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2
                       && reply->element[0]->type == REDIS_REPLY_STRING
                       && reply->element[1]->type == REDIS_REPLY_INTEGER) {
                status = LiveStatus::done;
                value = {reply->element[0]->str, reply->element[0]->len};
                ttl = reply->element[1]->integer >= 0 ? reply->element[1]->integer : -1;
            }
            op->callback(op->data, status, value, ttl);
        }
        ngx_free(op);
    }

    LiveOp* send_live(LiveOp* op, std::string_view key, int argc, const char** argv, const size_t* lens) noexcept
    {
        if (!router_->command(key, argc, argv, lens, on_live_reply, op)) {
            ngx_free(op);
            return nullptr;
        }
        return op;
    }

    static void on_ignored_reply(void*, redisReply*) {}

    static void on_live_reply(void* data, redisReply* reply)
    {
        auto* op = static_cast<LiveOp*>(data);
        auto* self = static_cast<RedisStore*>(op->store);
        if (op->callback != nullptr && !self->closing_) {
            LiveStatus status = LiveStatus::failed;
            std::string_view bytes;
            if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
                if (reply != nullptr) {
                    ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused a live log's %s: %s",
                                  &self->server_.name, op->append ? "append" : "read", reply->str);
                }
                // no answer, or "not now": sent again, it may land
                status = !reply || is_transient_error({reply->str, reply->len}) ? LiveStatus::lost : LiveStatus::failed;
            } else if (op->look) {
                status = read_look(op, reply, bytes) ? LiveStatus::done : LiveStatus::failed;
            } else if (op->append) {
                // SET ... NX: OK, or nil when a log was there; APPEND: the new length
                bool landed = reply->type == REDIS_REPLY_STATUS
                              || (reply->type == REDIS_REPLY_INTEGER
                                  && static_cast<std::uint64_t>(reply->integer) == op->at);
                status = landed ? LiveStatus::done : LiveStatus::gone;
            } else if (reply->type == REDIS_REPLY_STRING) {
                status = LiveStatus::done;
                bytes = {reply->str, reply->len};
            } else {
                status = LiveStatus::gone;  // nil: no such log
            }
            op->callback(op->data, status, bytes);
        }
        ngx_free(op);
    }

    // The script's reply: the look's entries (pieces.hpp), one per piece.
    static bool read_look(const LiveOp* op, const redisReply* reply, std::string_view& out) noexcept
    {
        if (reply->type != REDIS_REPLY_STRING || reply->len != op->at * piece_look_entry_size) {
            return false;
        }
        out = {reply->str, reply->len};
        return true;
    }

    // Remembers the longest lock_ttl claimed or renewed with.
    void note_lock_ttl(std::uint64_t lock_ttl_ms) noexcept
    {
        if (lock_ttl_ms > longest_lock_ttl_) {
            longest_lock_ttl_ = lock_ttl_ms;
        }
    }

    // lock_ttl_ms 0 (a settling whose request is gone): the longest this
    // store has claimed or renewed with, else idempotency_lock_ttl's default.
    std::uint64_t lock_ttl_or_longest(std::uint64_t lock_ttl_ms) const noexcept
    {
        if (lock_ttl_ms != 0) {
            return lock_ttl_ms;
        }
        return longest_lock_ttl_ != 0 ? longest_lock_ttl_ : default_lock_ttl_ms;
    }

    // The claim's reply: the waiter answered (granted, the record found, or
    // unavailable), or a claim nobody waits for any more released.
    static void on_claim_reply(void* data, redisReply* reply)
    {
        auto* op = static_cast<PendingOp*>(data);
        auto* self = static_cast<RedisStore*>(op->store);
        std::string_view found;
        std::uint64_t fence = 0;
        ClaimReply kind = op->waiter.fence ? read_fenced_claim_reply(reply, found, fence) : read_claim_reply(reply, found);
        bool lost = reply == nullptr;

        if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the claim: %s",
                          &self->server_.name, reply->str);
        }
        if (self->closing_) {
            // Worker exit: nobody is answered; a claim that may have been
            // granted expires within its lock_ttl.
            ngx_free(op);
            return;
        }
        const ClaimWaiter& waiter = op->waiter;
        if (waiter.callback != nullptr) {
            // Also while the worker exits gracefully: the request is still
            // there and holds the operation until it is answered.
            if (kind == ClaimReply::found) {
                // the request may keep the string: the reply lets go of it
                waiter.answer_found(op->key(), RecordBytes::owned(std::exchange(reply->str, nullptr), found), self->log_);
            } else if (kind == ClaimReply::granted) {
                waiter.granted(fence);
            } else {
                waiter.answer(Outcome::unavailable);
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

    const RedisServer& server_;
    Router* router_;
    ngx_log_t* log_;
    DecimalMemo lock_ttl_text_;  // a claim's lock TTL
    ScriptCalls calls_;  // what is owed Redis: stores, releases, renewals
    std::uint64_t longest_lock_ttl_ = 0;
    bool closing_ = false;
};

RedisStore** worker_stores = nullptr;
ngx_uint_t worker_store_count = 0;
const RedisServer* const* worker_servers = nullptr;

}  // namespace

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept
{
    set_oom_buffer(conf.oom_buffer);
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
