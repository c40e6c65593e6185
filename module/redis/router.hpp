// redis/router.hpp — picks the connection for each command (each names one
// key): the one server, the cluster node of its slot (following MOVED/ASK),
// or Sentinel's master (following failovers). Routers own their connections
// and never block. See docs/design.md#store-protocols.
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

    // As Connection::command: false when it cannot be sent now (handler not
    // called); else the handler runs once, with the reply or nullptr.
    // Redirections are followed here and never reach the handler.
    virtual bool command(std::string_view key, int argc, const char** argv, const size_t* argv_len,
                         ReplyHandler handler, void* data, bool queue_while_down = false,
                         Late late = {}) noexcept = 0;

    virtual void set_timeout(ngx_msec_t timeout) noexcept = 0;
};

// nullptr when out of memory.
Router* make_router(const RedisServer& server, ngx_log_t* log) noexcept;
Router* make_cluster_router(const RedisServer& server, ngx_log_t* log) noexcept;   // cluster_router.cpp
Router* make_sentinel_router(const RedisServer& server, ngx_log_t* log) noexcept;  // sentinel_router.cpp

// nullptr when construction or R::start fails.
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
// Cluster and Sentinel routers: a command with its own copy of its arguments,
// so it can be sent again elsewhere (MOVED, ASK, READONLY, master known).

constexpr int max_command_args = 8;
// Then it gets the reply it has.
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

void finish_owned(OwnedCommand* c, redisReply* reply) noexcept;

// Learnt at run time (cluster nodes, the current master); owned by the router.
struct Endpoint {
    ngx_str_t name;  // host:port
    ngx_addr_t addr;
    ngx_pool_t* pool;
};

// An IP address, not a name: no resolving in a worker. nullptr when not one.
Endpoint* make_endpoint(std::string_view host, unsigned port, ngx_log_t* log) noexcept;
void free_endpoint(Endpoint* e) noexcept;

}  // namespace idem::redis
