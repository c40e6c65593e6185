// redis/redis_store.hpp — the Store over Redis: the one-round-trip claim
// (SET NX PX GET), and completion and release fenced by the claim record in
// Lua scripts run by EVALSHA (sent again as EVAL on NOSCRIPT). What it owes
// Redis once the request is gone — a response to store, a key to release —
// it keeps and tries again after a lost connection or a transient error
// (retry.hpp), on a timer, renewing the claim of a response meanwhile. One
// store, and so one connection, per worker per configured Redis server.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::redis {

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept;
void stop_worker_stores(ngx_cycle_t* cycle) noexcept;

// The store of this worker for `server`; nullptr outside a worker.
Store* worker_store(const RedisServer& server, ngx_msec_t timeout) noexcept;

}  // namespace idem::redis
