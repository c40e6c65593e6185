// redis/redis_store.hpp — the Store over Redis: the one-round-trip claim,
// settles handed to script_calls.* (fenced or leased, retried until they
// land), live logs and pieces (redis_live.cpp), the operator's plane
// (redis_operator.cpp). One store per worker per Redis deployment. Must not
// touch the request. See docs/design.md#store-protocols.
#pragma once

#include <hiredis/hiredis.h>

#include "../conf.hpp"
#include "../store.hpp"
#include "router.hpp"
#include "script_calls.hpp"

namespace idem::redis {

class RedisStore final : public Store {
public:
    RedisStore(const RedisServer& server, Router* router, ngx_log_t* log) noexcept
        : server_(server), router_(router), log_(log), calls_(server, *router, log)
    {
    }

    // A graceful exit waited for what was owed (retry timers are not
    // cancelable) up to its window or worker_shutdown_timeout; what is left
    // is abandoned (logged and counted), its claim expiring within lock_ttl.
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
                     const ClaimWaiter& waiter) noexcept override;
    void abandon(PendingOp* op) noexcept override { op->waiter.callback = nullptr; }
    void complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                  std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease, StoreNotice notice) noexcept override;
    void release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept override;
    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Lease* lease) noexcept override;

    LiveOp* live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                        LiveCallback callback, void* data, LiveKind kind) noexcept override;
    LiveOp* live_read(std::string_view key, std::uint64_t at, bool may_be_gone, LiveCallback callback,
                      void* data) noexcept override;
    void live_abandon(LiveOp* op) noexcept override { op->callback = nullptr; }
    void live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept override;
    LiveOp* pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                        void* data) noexcept override;

    PeekOp* peek(std::string_view key, PeekCallback callback, void* data) noexcept override;
    PeekOp* purge(std::string_view key, std::string_view expected, PeekCallback callback, void* data) noexcept override;
    void peek_abandon(PeekOp* op) noexcept override { op->callback = nullptr; }

private:
    PeekOp* send_peek(PeekOp* op, std::string_view key, int argc, const char** argv, const size_t* lens) noexcept;
    static void on_peek_reply(void* data, redisReply* reply);

    LiveOp* send_live(LiveOp* op, std::string_view key, int argc, const char** argv, const size_t* lens) noexcept;
    static void on_ignored_reply(void*, redisReply*) {}
    static void on_live_reply(void* data, redisReply* reply);
    static bool read_look(const LiveOp* op, const redisReply* reply, std::string_view& out) noexcept;

    void note_lock_ttl(std::uint64_t lock_ttl_ms) noexcept;
    std::uint64_t lock_ttl_or_longest(std::uint64_t lock_ttl_ms) const noexcept;
    static void on_claim_reply(void* data, redisReply* reply);

    const RedisServer& server_;
    Router* router_;
    ngx_log_t* log_;
    DecimalMemo lock_ttl_text_;  // a claim's lock TTL
    ScriptCalls calls_;  // what is owed Redis: stores, releases, renewals
    std::uint64_t longest_lock_ttl_ = 0;
    bool closing_ = false;
};

}  // namespace idem::redis
