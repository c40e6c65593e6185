// redis/worker_stores.cpp — see worker_stores.hpp.

#include "worker_stores.hpp"

#include <new>

#include "redis_store.hpp"
#include "router.hpp"
#include "script_calls.hpp"
#include "scripts.hpp"

namespace idem::redis {
namespace {

RedisStore** worker_stores = nullptr;
ngx_uint_t worker_store_count = 0;
const RedisServer* const* worker_servers = nullptr;

}  // namespace

ngx_int_t start_worker_stores(ngx_cycle_t* cycle, const MainConf& conf) noexcept
{
    set_oom_buffer(conf.oom_buffer);
    if (conf.servers.nelts == 0) {
        return NGX_OK;
    }
    if (!digest_scripts()) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "idempotency: SHA-1 of the Redis scripts failed");
        return NGX_ERROR;
    }
    worker_stores = static_cast<RedisStore**>(ngx_calloc(conf.servers.nelts * sizeof(RedisStore*), cycle->log));
    if (worker_stores == nullptr) {
        return NGX_ERROR;
    }
    worker_store_count = conf.servers.nelts;
    worker_servers = static_cast<const RedisServer* const*>(conf.servers.elts);
    return NGX_OK;
}

void stop_worker_stores(ngx_cycle_t*) noexcept
{
    for (ngx_uint_t i = 0; i < worker_store_count; i++) {
        delete worker_stores[i];
    }
    ngx_free(worker_stores);
    worker_stores = nullptr;
    worker_store_count = 0;
}

Store* worker_store(const RedisServer& server, ngx_msec_t timeout) noexcept
{
    if (server.index >= worker_store_count) {
        return nullptr;
    }
    RedisStore*& store = worker_stores[server.index];
    if (store == nullptr) {
        const RedisServer& configured = *worker_servers[server.index];
        Router* router = make_router(configured, ngx_cycle->log);
        store = router ? new (std::nothrow) RedisStore(configured, router, ngx_cycle->log) : nullptr;
        if (store == nullptr) {
            delete router;
            return nullptr;
        }
    }
    store->router().set_timeout(timeout);
    return store;
}

}  // namespace idem::redis
