// redis/redis_conf.hpp — the handler of idempotency_redis,
// idempotency_redis_cluster and idempotency_redis_sentinel (the command's
// offset is its RedisKind): the location's RedisServer, shared by every
// location naming the same deployment (and, with `ssl`, the same TLS
// settings: redis/tls_conf.hpp).
#pragma once

#include "../conf.hpp"

namespace idem::redis {

char* set_redis(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// The same addresses, credentials and `ssl` (TLS settings aside).
bool same_deployment(const RedisServer& a, const RedisServer& b);

// A copy of `server` in the configuration's pool, appended to the main
// conf's list (its index set); nullptr when out of memory.
RedisServer* add_server(ngx_conf_t* cf, MainConf& mcf, const RedisServer& server);

}  // namespace idem::redis
