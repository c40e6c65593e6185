// live_board.cpp — see live_board.hpp.

#include "live_board.hpp"

#include <cstdint>
#include <cstring>

#include "module_zone.hpp"

namespace idem {
namespace {

constexpr std::string_view zone_name = "idempotency_live";

// Two kinds apart: a streaming log bumps its slot every few ms, which must
// not set its slot's waiters looking at the store each time; nor a settle
// the feeds reading.
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

// The last eight hex digits of the key's SHA-256 are as evenly spread as the
// whole, and cost a few instructions where a CRC32 of the key cost a new key
// over a thousand (claim and settle each ask).
ngx_uint_t live_board_slot(std::string_view key) noexcept
{
    static_assert((live_board_slots & (live_board_slots - 1)) == 0, "a power of two: the top bits choose");
    std::uint64_t tail = 0;
    std::size_t n = ngx_min(key.size(), sizeof tail);
    std::memcpy(&tail, key.data() + key.size() - n, n);
    return static_cast<ngx_uint_t>((tail * 0x9e3779b97f4a7c15u) >> 32) % live_board_slots;
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
