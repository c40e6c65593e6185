// redis/script_calls.hpp — what the Redis store owes Redis once a request
// handed it over (store, release, renew, put back): fenced calls with their
// own argument copies, retried from a timer until they land or their window
// ends. Words: script_render.cpp; replies: script_reply.cpp; OOM-refused
// stores: kept_stores.cpp. See docs/design.md#store-protocols.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../lease.hpp"
#include "../owned_args.hpp"
#include "../record_bytes.hpp"
#include "../store.hpp"
#include "resp.hpp"
#include "retry.hpp"
#include "router.hpp"
#include "scripts.hpp"

namespace idem {
struct RedisServer;
}

namespace idem::redis {

constexpr int max_script_args = 6;

class ScriptCalls;

// Owed roles are retried after a transient failure, and an exit that leaves
// them undone is logged and counted; a renewal is sent again after a lost
// reply; a keepalive is fire and forget, and silent.
enum class Role { store, release, restore, renewal, keepalive };

enum class Form : std::uint8_t {
    script,       // the fenced script (EVALSHA, or EVAL)
    leased,       // a store within its claim's lease: MULTI; PEXPIRETIME; SET ... XX GET; EXEC
    conditional,  // the server's conditional write: SET ... IFEQ, DELIFEQ or DELEX ... IFEQ
};

enum class Words : std::uint8_t { as_server_can, script };

constexpr bool owed(Role role) noexcept
{
    return role == Role::store || role == Role::release || role == Role::restore;
}

// `marker`: only the marker, the worker already holding its
// idempotency_redis_oom_buffer of record bytes.
enum class Kept : std::uint8_t { no, record, marker };

// Linked in its store's list from creation to finish.
struct ScriptCall {
    ScriptCalls* owner;
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
    Form form;       // how the attempt in flight went (chosen as it left)
    bool scripted;   // the script from now on: a keep (Words::script), or a conditional renewal refused for memory
    Kept kept;       // a store refused for memory: its claim kept for idempotency_ttl, and what it holds
    std::uint64_t ttl_ms;      // a store's: the record's life (idempotency_ttl, or the upstream's)
    std::uint64_t kept_until;  // kept: when its claim's extended life ends (ngx_current_msec)
    ngx_queue_t parked;        // kept, and waiting for its next attempt: in its ScriptCalls' queue
    Lease* lease;    // a store's or a renewal's claim lease (held), nullptr: none
    RecordBytes record;  // a store's record (its own bytes): args[store_record_arg] views it
    std::string_view marker;  // a store's unreplayable marker, stored instead of a record it cannot hold
    StoreNotice notice;    // a store's: told its outcome when the call finishes
    StoreOutcome outcome;  // ... as the last answer left it (unknown until one came)
    OwnedArgs<max_script_args> args;  // KEYS[1], then ARGV (copies, but for a store's record)
};

// KEYS[1] = key, ARGV = claim, record, ttl; then, not sent, the marker.
constexpr int store_record_arg = 2;
constexpr int store_sent_args = 4;
constexpr int store_marker_arg = 4;

// True once an exiting worker has tried what it owes for
// worker_shutdown_timeout (when set).
bool past_exit_deadline() noexcept;

void set_oom_buffer(std::size_t bytes) noexcept;

// Room for NGX_INT64_LEN; returns the length.
inline size_t decimal(std::uint64_t n, char* out) noexcept
{
    return static_cast<size_t>(write_decimal(out, n) - out);
}

// A location's TTLs are the same from one request to the next.
class DecimalMemo {
public:
    std::string_view of(std::uint64_t n) noexcept
    {
        if (len_ == 0 || n != n_) {
            n_ = n;
            len_ = decimal(n, text_);
        }
        return {text_, len_};
    }

private:
    std::uint64_t n_ = 0;
    size_t len_ = 0;
    char text_[NGX_INT64_LEN];
};

class ScriptCalls {
public:
    ScriptCalls(const RedisServer& server, Router& router, ngx_log_t* log) noexcept
        : server_(server), router_(router), log_(log)
    {
        ngx_queue_init(&parked_);
        // not cancelable: an exiting worker waits for its kept stores, as
        // for the rest of what it owes, within their window
        set_event(probe_, on_probe, this, log_);
    }
    // Abandons every call left (logged and counted).
    ~ScriptCalls();
    ScriptCalls(const ScriptCalls&) = delete;
    ScriptCalls& operator=(const ScriptCalls&) = delete;

    // Nothing new is sent; what comes back is abandoned.
    void close() noexcept { closing_ = true; }

    // `lease`: a renewal that finds the claim gone revokes it.
    void call(Script& script, Role role, const std::string_view* args, int argc, std::uint64_t lock_ttl_ms,
              Lease* lease = nullptr) noexcept;
    // Owned record bytes are kept, borrowed ones copied. The first attempt
    // goes unfenced if it leaves while `lease` holds. `marker` (copied) goes
    // instead of an OOM-refused record the worker cannot hold.
    void store(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
               std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease, StoreNotice notice = {}) noexcept;
    // Words::script: the fenced script on every server (a keep must land
    // ahead of the store it precedes: kept_stores.cpp).
    void renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Role role,
               Lease* lease = nullptr, Words words = Words::as_server_can) noexcept;

private:
    void start(ScriptCall* call, Script& script, Role role, std::uint64_t lock_ttl_ms, Lease* lease) noexcept;
    static std::string_view key_of(const ScriptCall* call) noexcept { return call->args[0]; }
    void send(ScriptCall* call) noexcept;
    // script_render.cpp: the words of an attempt
    static int script_words(const ScriptCall* call, const char** argv, size_t* lens) noexcept;
    static void render(void* data, const ServerFeatures& features, LateWords& out);
    static void render_store(ScriptCall* call, LateWords& out) noexcept;
    static void render_script(ScriptCall* call, LateWords& out) noexcept;
    static bool render_conditional(ScriptCall* call, const ServerFeatures& features, LateWords& out) noexcept;
    void failed(ScriptCall* call, std::string_view why) noexcept;
    // kept_stores.cpp: a response Redis refused for memory
    void keep(ScriptCall* store) noexcept;
    void keep_claim(ScriptCall* store) noexcept;
    void park(ScriptCall* store) noexcept;
    static void unpark(ScriptCall* store) noexcept;
    static void release_held(ScriptCall* call) noexcept;
    void probe() noexcept;
    void attempt_kept(ScriptCall* store) noexcept;
    void send_parked(std::size_t count) noexcept;
    static void on_probe(ngx_event_t* ev);
    static void on_retry_timer(ngx_event_t* ev);
    void give_up(ScriptCall* call) noexcept;
    void abandon(ScriptCall* call) noexcept;
    static void count_abandoned(const ScriptCall* call) noexcept;
    void finish(ScriptCall* call) noexcept;
    // script_reply.cpp: what a reply says, and what the call does on it
    static long long answer_of(const ScriptCall* call, const redisReply* reply) noexcept;
    void leased_stored(ScriptCall* store, const redisReply* reply) noexcept;
    static void on_script_reply(void* data, redisReply* reply);

    const RedisServer& server_;
    Router& router_;
    ngx_log_t* log_;
    ScriptCall* calls_ = nullptr;  // every call not finished: in flight, or waiting for its next attempt
    ngx_queue_t parked_;           // stores kept for memory waiting for their next attempt, oldest first
    ngx_event_t probe_{};          // the next attempt of the oldest of them (retry.hpp: oom_probe_interval_ms)
    DecimalMemo ttl_text_;         // a store's TTL
    bool closing_ = false;
};

}  // namespace idem::redis
