// redis/tls_conf.hpp — the idempotency_redis_ssl_* directives (inherited as
// proxy_ssl_*) and a RedisServer's TLS context. Each distinct (deployment,
// TLS settings) pair is its own RedisServer, with its own connections.
#pragma once

#include "../conf.hpp"
#include "tls.hpp"

namespace idem::redis {

struct TlsContext {
    RedisTlsConf conf;  // as configured (paths as written)
    ngx_ssl_t ssl;      // protocols, ciphers, client certificate, trusted CAs
};

extern ngx_conf_bitmask_t tls_protocols[];

void init_tls_conf(RedisTlsConf& conf) noexcept;  // create_loc_conf

// `host` empty: a node learnt at run time, named by its IP address.
inline TlsTarget tls_target(const RedisServer& server, std::string_view host = {}) noexcept
{
    return {server.ssl ? server.tls : nullptr, host};
}

// Once `enable` and `server` are merged: where on with `ssl`, points `server`
// at this deployment's RedisServer for these settings (built here the first
// time: nginx -t's refusals are made here).
char* merge_tls_conf(ngx_conf_t* cf, RedisTlsConf& conf, const RedisTlsConf& prev, RedisServer*& server,
                     ngx_flag_t enabled);

}  // namespace idem::redis
