// redis/router.cpp — see router.hpp: the one-server router, and what the
// cluster and Sentinel routers share.

#include "router.hpp"

#include <new>

#include "../conf.hpp"
#include "tls_conf.hpp"

namespace idem::redis {
namespace {

// One server: its connection takes every command as it is.
class SingleRouter final : public Router {
public:
    SingleRouter(const RedisServer& server, ngx_log_t* log) noexcept
        : conn_(server.name, addresses_of(server.urls[0]), server.auth, log,
                ConnectionOptions::data_node_at(tls_target(server, view(server.urls[0].host))))
    {
    }

    bool command(std::string_view, int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                 void* data, bool queue_while_down, Late late) noexcept override
    {
        return conn_.command(argc, argv, argv_len, handler, data, queue_while_down, late);
    }

    void set_timeout(ngx_msec_t timeout) noexcept override { conn_.set_timeout(timeout); }

private:
    Connection conn_;
};

}  // namespace

Router* make_router(const RedisServer& server, ngx_log_t* log) noexcept
{
    if (server.ssl && server.tls == nullptr) {
        // never fall back to plain TCP (merge_tls_conf builds every context in use)
        ngx_log_error(NGX_LOG_ALERT, log, 0, "idempotency: Redis %V has no TLS context", &server.name);
        return nullptr;
    }
    switch (server.kind) {
    case RedisKind::cluster: return make_cluster_router(server, log);
    case RedisKind::sentinel: return make_sentinel_router(server, log);
    case RedisKind::single: break;
    }
    return new (std::nothrow) SingleRouter(server, log);
}

OwnedCommand* own_command(std::string_view key, int argc, const char** argv, const size_t* argv_len,
                          ReplyHandler handler, void* data, bool queue_while_down, Late late,
                          ngx_log_t* log) noexcept
{
    if (argc > max_command_args) {
        return nullptr;
    }
    std::string_view args[1 + max_command_args] = {key};
    for (int i = 0; i < argc; i++) {
        args[1 + i] = {argv[i], argv_len[i]};
    }
    OwnedCommand* c = new_with_args<OwnedCommand>(args, 1 + argc, log);
    if (c != nullptr) {
        c->handler = handler;
        c->data = data;
        c->queue_while_down = queue_while_down;
        c->late = late;
    }
    return c;
}

void finish_owned(OwnedCommand* c, redisReply* reply) noexcept
{
    ReplyHandler handler = c->handler;
    void* data = c->data;
    ngx_free(c);
    if (handler != nullptr) {
        handler(data, reply);
    }
}

Endpoint* make_endpoint(std::string_view host, unsigned port, ngx_log_t* log) noexcept
{
    ngx_pool_t* pool = ngx_create_pool(512, log);
    if (pool == nullptr) {
        return nullptr;
    }
    auto* e = static_cast<Endpoint*>(ngx_pcalloc(pool, sizeof(Endpoint)));
    bool v6 = host.find(':') != std::string_view::npos;
    size_t cap = host.size() + 2 + 1 + NGX_INT_T_LEN;
    auto* text = static_cast<u_char*>(ngx_pnalloc(pool, cap));
    if (e == nullptr || text == nullptr || host.empty() || port == 0 || port > 65535) {
        ngx_destroy_pool(pool);
        return nullptr;
    }
    u_char* end = v6 ? ngx_snprintf(text, cap, "[%*s]:%ui", host.size(), host.data(), static_cast<ngx_uint_t>(port))
                     : ngx_snprintf(text, cap, "%*s:%ui", host.size(), host.data(), static_cast<ngx_uint_t>(port));
    size_t len = static_cast<size_t>(end - text);
    if (ngx_parse_addr_port(pool, &e->addr, text, len) != NGX_OK) {
        ngx_destroy_pool(pool);
        return nullptr;
    }
    e->name = ngx_str_t{len, text};
    e->addr.name = e->name;
    e->pool = pool;
    return e;
}

void free_endpoint(Endpoint* e) noexcept
{
    if (e != nullptr) {
        ngx_destroy_pool(e->pool);
    }
}

}  // namespace idem::redis
