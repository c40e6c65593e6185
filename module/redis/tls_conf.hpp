// redis/tls_conf.hpp — the idempotency_redis_ssl_* directives: their
// defaults and inheritance (as proxy_ssl_*), nginx -t's checks, and the TLS
// context (nginx's ngx_ssl_t) of a RedisServer that has the `ssl`
// parameter. The settings in force where a location uses the store decide:
// each distinct (deployment, TLS settings) pair is its own RedisServer, with
// its own context and its own connections in each worker.
#pragma once

#include "../conf.hpp"
#include "tls.hpp"

namespace idem::redis {

struct TlsContext {
    RedisTlsConf conf;  // as configured (paths as written)
    ngx_ssl_t ssl;      // protocols, ciphers, client certificate, trusted CAs
};

// For idempotency_redis_ssl_protocols (ngx_conf_set_bitmask_slot).
extern ngx_conf_bitmask_t tls_protocols[];

void init_tls_conf(RedisTlsConf& conf) noexcept;  // create_loc_conf

// The TLS of a connection to `server` at `host` (empty: a node learnt at
// run time, named by its IP address).
inline TlsTarget tls_target(const RedisServer& server, std::string_view host = {}) noexcept
{
    return {server.ssl ? server.tls : nullptr, host};
}

// merge_loc_conf, once `enable` and `server` are merged: inherits the
// settings, then, where the module is on and `server` has `ssl`, points
// `server` at the RedisServer of this deployment with these settings
// (built here the first time: nginx -t's refusals are made here).
char* merge_tls_conf(ngx_conf_t* cf, RedisTlsConf& conf, const RedisTlsConf& prev, RedisServer*& server,
                     ngx_flag_t enabled);

}  // namespace idem::redis
