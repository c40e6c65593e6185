// redis/redis_store.hpp — the Store over Redis, and the worker's stores: the
// one-round-trip claim (SET NX PX GET), whose found record the request may
// keep (the reply's string), and completion, release and renewal handed to
// script_calls.* — fenced by the claim record in Lua scripts, or a store
// within the claim's lease, kept and tried again after a lost connection or
// a transient error until they land. One store, and so one connection (or
// one per cluster node), per worker per configured Redis deployment.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::redis {

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept;
void stop_worker_stores(ngx_cycle_t* cycle) noexcept;

// The store of this worker for `server`; nullptr outside a worker.
Store* worker_store(const RedisServer& server, ngx_msec_t timeout) noexcept;

}  // namespace idem::redis
