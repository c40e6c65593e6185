// live_board.cpp — see live_board.hpp.

#include "live_board.hpp"

#include "module_zone.hpp"
#include "send.hpp"

namespace idem {
namespace {

constexpr ngx_uint_t slots = 2048;
constexpr std::string_view zone_name = "idempotency_live";

struct Board {
    ngx_atomic_t generation[slots];
};

Board* board = nullptr;  // this worker's view of the zone

}  // namespace

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept
{
    return add_module_zone(cf, zone_name, 8 * ngx_pagesize, sizeof(Board));
}

void live_board_attach(ngx_cycle_t* cycle) noexcept
{
    board = static_cast<Board*>(module_zone_block(cycle, zone_name));
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
