// redis/worker_stores.hpp — a worker's Redis stores, one per deployment, made
// on first use and deleted at exit. Must not touch what a store does.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::redis {

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept;
void stop_worker_stores(ngx_cycle_t* cycle) noexcept;

// The store of this worker for `server`; nullptr outside a worker.
Store* worker_store(const RedisServer& server, ngx_msec_t timeout) noexcept;

}  // namespace idem::redis
