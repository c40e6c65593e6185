// live_board.cpp — see live_board.hpp.

#include "live_board.hpp"

#include "conf.hpp"
#include "send.hpp"

namespace idem {
namespace {

constexpr ngx_uint_t slots = 2048;
constexpr std::string_view zone_name = "idempotency_live";

struct Board {
    ngx_atomic_t generation[slots];
};

Board* board = nullptr;  // this worker's view of the zone

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
    auto* b = static_cast<Board*>(ngx_slab_calloc(pool, sizeof(Board)));
    if (b == nullptr) {
        return NGX_ERROR;
    }
    pool->data = b;
    shm_zone->data = b;
    return NGX_OK;
}

}  // namespace

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept
{
    ngx_str_t name{zone_name.size(), bytes(zone_name)};
    ngx_shm_zone_t* zone = ngx_shared_memory_add(cf, &name, 8 * ngx_pagesize, &ngx_http_idempotency_module);
    if (zone == nullptr) {
        return NGX_ERROR;
    }
    zone->init = init_zone;
    return NGX_OK;
}

// Looked up in the cycle the worker runs (as the metrics zone is).
void live_board_attach(ngx_cycle_t* cycle) noexcept
{
    board = nullptr;
    for_each_entry<ngx_shm_zone_t>(cycle->shared_memory, [](ngx_shm_zone_t& z) {
        if (z.tag == &ngx_http_idempotency_module && view(z.shm.name) == zone_name) {
            board = static_cast<Board*>(z.data);
            return false;
        }
        return true;
    });
}

ngx_uint_t live_board_slot(std::string_view key) noexcept
{
    return ngx_crc32_long(bytes(key), key.size()) % slots;
}

ngx_atomic_uint_t live_board_read(ngx_uint_t slot) noexcept
{
    return board != nullptr ? board->generation[slot] : 0;
}

void live_board_bump(ngx_uint_t slot) noexcept
{
    if (board != nullptr) {
        ngx_atomic_fetch_add(&board->generation[slot], 1);
    }
}

}  // namespace idem
