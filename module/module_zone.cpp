// module_zone.cpp — see module_zone.hpp.

#include "module_zone.hpp"

#include <cstdint>

#include "conf.hpp"
#include "send.hpp"

namespace idem {
namespace {

// shm_zone->data holds the block's size until the zone is set up, then the
// block; `data` is the block of the zone of the same name in the cycle
// before a reload.
ngx_int_t init_zone(ngx_shm_zone_t* shm_zone, void* data)
{
    if (data != nullptr) {
        shm_zone->data = data;
        return NGX_OK;
    }
    auto* pool = reinterpret_cast<ngx_slab_pool_t*>(shm_zone->shm.addr);
    if (shm_zone->shm.exists) {
        shm_zone->data = pool->data;
        return NGX_OK;
    }
    auto size = reinterpret_cast<std::uintptr_t>(shm_zone->data);
    void* block = ngx_slab_calloc(pool, size);
    if (block == nullptr) {
        return NGX_ERROR;
    }
    pool->data = block;
    shm_zone->data = block;
    return NGX_OK;
}

}  // namespace

ngx_int_t add_module_zone(ngx_conf_t* cf, std::string_view name, std::size_t zone_size,
                          std::size_t block_size) noexcept
{
    ngx_str_t zone_name{name.size(), bytes(name)};
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, &zone_name, zone_size, &ngx_http_idempotency_module);
    if (zone == nullptr) {
        return NGX_ERROR;
    }
    zone->init = init_zone;
    zone->data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(block_size));
    return NGX_OK;
}

void* module_zone_block(ngx_cycle_t* cycle, std::string_view name) noexcept
{
    void* block = nullptr;
    for_each_entry<ngx_shm_zone_t>(cycle->shared_memory, [&](ngx_shm_zone_t& z) {
        if (z.tag == &ngx_http_idempotency_module && view(z.shm.name) == name) {
            block = z.data;
            return false;
        }
        return true;
    });
    return block;
}

}  // namespace idem
