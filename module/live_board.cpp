// live_board.cpp — see live_board.hpp.

#include "live_board.hpp"

#include "module_zone.hpp"
#include "send.hpp"

namespace idem {
namespace {

constexpr std::string_view zone_name = "idempotency_live";

// The two kinds apart: a streaming log bumps its slot every few
// milliseconds, which must not set the waiters of its slot's other keys
// looking at the store each time; nor a settle the feeds reading.
struct Board {
    ngx_atomic_t generation[live_board_slots];  // live logs
    ngx_atomic_t settles[live_board_slots];
};

Board* board = nullptr;  // this worker's view of the zone

}  // namespace

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept
{
    return add_module_zone(cf, zone_name, 16 * ngx_pagesize, sizeof(Board));
}

void live_board_attach(ngx_cycle_t* cycle) noexcept
{
    board = static_cast<Board*>(module_zone_block(cycle, zone_name));
}

ngx_uint_t live_board_slot(std::string_view key) noexcept
{
    return ngx_crc32_long(bytes(key), key.size()) % live_board_slots;
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

ngx_atomic_uint_t live_board_settles(ngx_uint_t slot) noexcept
{
    return board != nullptr ? board->settles[slot] : 0;
}

void live_board_settled(ngx_uint_t slot) noexcept
{
    if (board != nullptr) {
        ngx_atomic_fetch_add(&board->settles[slot], 1);
    }
}

}  // namespace idem
