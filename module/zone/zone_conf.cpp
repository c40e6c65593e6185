// zone/zone_conf.cpp — idempotency_zone and idempotency_store; the zone's
// store is handed on across reloads through shm_zone->data.
// See docs/design.md#the-zone-across-reloads.

#include "zone_conf.hpp"

#include <new>

#include "../conf_util.hpp"
#include "zone_store.hpp"

namespace idem::zone {

namespace {

// So that a zone name used by another module (or the metrics zone) is
// refused by nginx instead of being shared.
char zone_tag;

// Asked in the master during a reload: it maps the zone.
bool holds_live(const ngx_shm_zone_t* zone) noexcept
{
    auto* store = static_cast<const ZoneStore*>(zone->data);
    if (store == nullptr || !store->attached()) {
        return false;
    }
    ngx_slab_pool_t* pool = store->pool();
    Shared* sh = store->shared();
    ngx_shmtx_lock(&pool->mutex);
    ngx_rbtree_node_t* n = sh->by_expiry.root;
    bool live = n != sh->by_expiry.sentinel;
    if (live) {
        while (n->right != sh->by_expiry.sentinel) {
            n = n->right;  // the latest expiry
        }
        live = static_cast<ngx_msec_int_t>(n->key - ngx_current_msec) > 0;
    }
    ngx_shmtx_unlock(&pool->mutex);
    return live;
}

const ngx_shm_zone_t* find_zone(ngx_list_t& zones, const ngx_str_t& name) noexcept
{
    for (ngx_list_part_t* part = &zones.part; part != nullptr; part = part->next) {
        auto* zone = static_cast<ngx_shm_zone_t*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (zone[i].tag == &zone_tag && zone[i].shm.name.len == name.len
                && ngx_strncmp(zone[i].shm.name.data, name.data, name.len) == 0) {
                return &zone[i];
            }
        }
    }
    return nullptr;
}

// The records stay where they are: nginx keeps a zone whose name and size
// are unchanged.
ngx_int_t init_zone(ngx_shm_zone_t* shm_zone, void* data)
{
    auto* store = static_cast<ZoneStore*>(shm_zone->data);
    if (auto* old = static_cast<ZoneStore*>(data)) {
        store->attach(old->shared(), old->pool());
        return NGX_OK;
    }
    auto* pool = reinterpret_cast<ngx_slab_pool_t*>(shm_zone->shm.addr);
    if (shm_zone->shm.exists) {
        store->attach(static_cast<Shared*>(pool->data), pool);
        return NGX_OK;
    }
    auto* sh = static_cast<Shared*>(ngx_slab_alloc(pool, sizeof(Shared)));
    if (sh == nullptr) {
        return NGX_ERROR;
    }
    pool->data = sh;
    ngx_rbtree_init(&sh->by_key, &sh->key_sentinel, insert_by_key);
    ngx_rbtree_init(&sh->by_expiry, &sh->expiry_sentinel, ngx_rbtree_insert_value);
    sh->last_fence = 0;

    size_t len = sizeof(" in idempotency zone \"\"") + shm_zone->shm.name.len;
    pool->log_ctx = static_cast<u_char*>(ngx_slab_alloc(pool, len));
    if (pool->log_ctx == nullptr) {
        return NGX_ERROR;
    }
    ngx_sprintf(pool->log_ctx, " in idempotency zone \"%V\"%Z", &shm_zone->shm.name);
    ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                  "idempotency zone \"%V\" (%uzK) starts empty: a reload keeps its records, a restart or a binary "
                  "upgrade does not",
                  &shm_zone->shm.name, shm_zone->shm.size / 1024);
    pool->log_nomem = 0;  // a full zone is reported by the store, once per second
    store->attach(sh, pool);
    return NGX_OK;
}

}  // namespace

ngx_shm_zone_t* add_zone(ngx_conf_t* cf, ngx_str_t& name, size_t size) noexcept
{
    return ngx_shared_memory_add(cf, &name, size, &zone_tag);
}

bool make_store(ngx_conf_t* cf, ngx_shm_zone_t* shm) noexcept
{
    void* memory = ngx_pcalloc(cf->pool, sizeof(ZoneStore));
    if (memory == nullptr) {
        return false;
    }
    // In the configuration's pool, like the rest of it; nothing to destroy.
    shm->data = new (memory) ZoneStore(shm);
    shm->init = init_zone;
    return true;
}

bool defined(const ngx_shm_zone_t* zone) noexcept
{
    return zone->data != nullptr;
}

Store* attached_store(ngx_shm_zone_t* zone) noexcept
{
    auto* store = static_cast<ZoneStore*>(zone->data);
    return store != nullptr && store->attached() ? store : nullptr;
}

char* set_zone(ngx_conf_t* cf, ngx_command_t*, void*)
{
    ngx_str_t arg = static_cast<ngx_str_t*>(cf->args->elts)[1];
    ngx_str_t name;
    u_char* colon = nullptr;
    if (!parameter(arg, "zone=", name) || (colon = ngx_strlchr(name.data, name.data + name.len, ':')) == nullptr
        || colon == name.data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\" in \"idempotency_zone\" (expected zone=NAME:SIZE)",
                           &arg);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_str_t size_arg{static_cast<size_t>(name.data + name.len - colon - 1), colon + 1};
    name.len = static_cast<size_t>(colon - name.data);
    ssize_t size = ngx_parse_size(&size_arg);
    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid size \"%V\" of zone \"%V\" in \"idempotency_zone\"", &size_arg,
                           &name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (size < static_cast<ssize_t>(8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "zone \"%V\" of \"idempotency_zone\" is too small: at least %uzk", &name,
                           8 * ngx_pagesize / 1024);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_shm_zone_t* shm = add_zone(cf, name, static_cast<size_t>(size));
    if (shm == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (shm->data != nullptr) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate zone \"%V\" in \"idempotency_zone\"", &name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    return make_store(cf, shm) ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

u_char* write_usage(u_char* p, u_char* end) noexcept
{
    bool first = true;
    auto* cycle = const_cast<ngx_cycle_t*>(ngx_cycle);  // nginx's pointer is volatile; the cycle is not written here
    for (ngx_list_part_t* part = &cycle->shared_memory.part; part != nullptr; part = part->next) {
        auto* zone = static_cast<ngx_shm_zone_t*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            auto* store = zone[i].tag == &zone_tag ? static_cast<const ZoneStore*>(zone[i].data) : nullptr;
            if (store == nullptr || !store->attached()) {
                continue;
            }
            if (first) {
                p = ngx_slprintf(p, end,
                                 "# HELP idempotency_zone_bytes Each idempotency_zone's size, and the bytes of its "
                                 "pages free.\n# TYPE idempotency_zone_bytes gauge\n");
                first = false;
            }
            ngx_slab_pool_t* pool = store->pool();
            ngx_shmtx_lock(&pool->mutex);
            size_t free_bytes = pool->pfree * ngx_pagesize;
            ngx_shmtx_unlock(&pool->mutex);
            p = ngx_slprintf(p, end,
                             "idempotency_zone_bytes{zone=\"%V\",state=\"size\"} %uz\n"
                             "idempotency_zone_bytes{zone=\"%V\",state=\"free\"} %uz\n",
                             &zone[i].shm.name, zone[i].shm.size, &zone[i].shm.name, free_bytes);
        }
    }
    return p;
}

bool keeps_records(ngx_conf_t* cf) noexcept
{
    ngx_cycle_t* old = cf->cycle->old_cycle;
    if (old == nullptr || old->shared_memory.part.elts == nullptr) {
        return true;  // a start, or nginx -t: no running zone to lose
    }
    for (ngx_list_part_t* part = &old->shared_memory.part; part != nullptr; part = part->next) {
        auto* zone = static_cast<ngx_shm_zone_t*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (zone[i].tag != &zone_tag) {
                continue;
            }
            const ngx_shm_zone_t* next = find_zone(cf->cycle->shared_memory, zone[i].shm.name);
            if (next != nullptr && next->shm.size == zone[i].shm.size) {
                continue;  // kept: nginx hands the same memory on
            }
            if (!holds_live(&zone[i])) {
                continue;  // nothing to lose
            }
            if (next != nullptr) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "idempotency_zone \"%V\": its size changes from %uzK to %uzK while it holds claims "
                                   "or stored responses, which nginx would drop with the old zone (their retries would "
                                   "execute again): keep %uzK in this reload, and change the size with a restart, "
                                   "which starts the zone empty",
                                   &zone[i].shm.name, zone[i].shm.size / 1024, next->shm.size / 1024,
                                   zone[i].shm.size / 1024);
            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "idempotency_zone \"%V\" (%uzK) is gone from the configuration while it holds "
                                   "claims or stored responses, which nginx would drop with it (their retries would "
                                   "execute again): keep it in this reload, or rename or remove it with a restart",
                                   &zone[i].shm.name, zone[i].shm.size / 1024);
            }
            return false;
        }
    }
    return true;
}

char* set_store(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->zone != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    ngx_str_t arg = static_cast<ngx_str_t*>(cf->args->elts)[1];
    ngx_str_t name;
    if (view(arg) == "redis") {
        lcf->zone = nullptr;
        return NGX_CONF_OK;
    }
    if (!parameter(arg, "zone=", name)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"%V\" in \"idempotency_store\" (expected zone=NAME or redis)",
                           &arg);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    // Size 0: a reference; idempotency_zone (anywhere in the http block) defines it.
    lcf->zone = add_zone(cf, name, 0);
    return lcf->zone != nullptr ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

}  // namespace idem::zone
