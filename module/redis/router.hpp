// redis/router.hpp — where the store's commands go. Every command the store
// sends names exactly one key; a router picks the connection for it: the
// one server, the cluster node that serves the key's slot (following MOVED
// and ASK), or the master Sentinel names (following failovers). Routers own
// their connections; none of them blocks. What the cluster and Sentinel
// routers share: a command's own copy of its words, and how often it may be
// sent elsewhere.
#pragma once

#include <new>
#include <string_view>

#include "../owned_args.hpp"
#include "connection.hpp"

namespace idem {
struct RedisServer;
}

namespace idem::redis {

class Router {
public:
    virtual ~Router() = default;

    // As Connection::command, for a command about `key`: false when it
    // cannot be sent now (the handler is not called then); otherwise the
    // handler runs once, with the reply, or with nullptr when no reply will
    // come. Redirections are followed here and never reach the handler.
    // A late command (`late`) chooses its words each time it leaves.
    virtual bool command(std::string_view key, int argc, const char** argv, const size_t* argv_len,
                         ReplyHandler handler, void* data, bool queue_while_down = false,
                         Late late = {}) noexcept = 0;

    // The shortest idempotency_redis_timeout of the router's users.
    virtual void set_timeout(ngx_msec_t timeout) noexcept = 0;
};

// A new router for `server` (nullptr when out of memory).
Router* make_router(const RedisServer& server, ngx_log_t* log) noexcept;
Router* make_cluster_router(const RedisServer& server, ngx_log_t* log) noexcept;   // cluster_router.cpp
Router* make_sentinel_router(const RedisServer& server, ngx_log_t* log) noexcept;  // sentinel_router.cpp

// A new router of type R, started (R::start: its seed nodes, its
// sentinels); nullptr when either fails.
template <typename R>
Router* start_router(const RedisServer& server, ngx_log_t* log) noexcept
{
    auto* router = new (std::nothrow) R(server, log);
    if (router != nullptr && !router->start()) {
        delete router;
        return nullptr;
    }
    return router;
}

// ----------------------------------------------------------------------------
// Shared by the cluster and Sentinel routers: a command with its own copy
// of its arguments, so that it can be sent again elsewhere (after MOVED,
// ASK, READONLY, or once the master is known).

constexpr int max_command_args = 8;
// How many times one command is sent elsewhere (MOVED or ASK in a cluster,
// READONLY from what Sentinel named the master) before it gets the reply it
// has.
constexpr int max_redirects = 5;

struct OwnedCommand {
    OwnedCommand* next;   // in a router's waiting list
    ReplyHandler handler;  // the store's
    void* data;
    void* router;
    unsigned target;  // the router's index of where it was sent
    int redirects;         // times sent elsewhere so far (max_redirects)
    bool queue_while_down;
    Late late;
    OwnedArgs<1 + max_command_args> args;  // the key, then the command's arguments
};

OwnedCommand* own_command(std::string_view key, int argc, const char** argv, const size_t* argv_len,
                          ReplyHandler handler, void* data, bool queue_while_down, Late late,
                          ngx_log_t* log) noexcept;
inline std::string_view key_of(const OwnedCommand& c) noexcept { return c.args[0]; }

inline bool send_owned(Connection& conn, OwnedCommand* c, ReplyHandler on_reply) noexcept
{
    return conn.command(c->args.count - 1, c->args.arg + 1, c->args.len + 1, on_reply, c, c->queue_while_down,
                        c->late);
}

// Gives `c` its answer and frees it.
void finish_owned(OwnedCommand* c, redisReply* reply) noexcept;

// Addresses learnt at run time (cluster nodes, the current master): a
// parsed address with the name it is logged under, owned by the router.
struct Endpoint {
    ngx_str_t name;  // host:port
    ngx_addr_t addr;
    ngx_pool_t* pool;
};

// Parses "host:port" (an IP address, not a name: no resolving in a
// worker); nullptr when it is not one.
Endpoint* make_endpoint(std::string_view host, unsigned port, ngx_log_t* log) noexcept;
void free_endpoint(Endpoint* e) noexcept;

}  // namespace idem::redis
