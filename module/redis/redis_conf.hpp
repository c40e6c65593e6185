// redis/redis_conf.hpp — the handler of idempotency_redis,
// idempotency_redis_cluster and idempotency_redis_sentinel (the command's
// offset is its RedisKind): the location's RedisServer, shared by every
// location naming the same deployment.
#pragma once

#include "../conf.hpp"

namespace idem::redis {

char* set_redis(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem::redis
