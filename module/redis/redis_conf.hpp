// redis/redis_conf.hpp — the Redis directives' handler: a location's
// RedisServer, shared by every location naming the same deployment (and TLS
// settings).
#pragma once

#include "../conf.hpp"

namespace idem::redis {

char* set_redis(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// The same addresses, credentials and `ssl` (TLS settings aside).
bool same_deployment(const RedisServer& a, const RedisServer& b);

// In the configuration's pool, appended to the main conf's list (index set);
// nullptr when out of memory.
RedisServer* add_server(ngx_conf_t* cf, MainConf& mcf, const RedisServer& server);

}  // namespace idem::redis
