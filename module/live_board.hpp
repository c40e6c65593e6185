// live_board.hpp — the gateway's board of live logs (docs/design.md#live-join),
// in a small shared memory zone of its own: a generation per slot, which a
// worker bumps each time the store took more of a live log it publishes, so
// that a feed in another worker of the same nginx, which looks at its slot
// every millisecond, reads the store at once rather than on its next timer.
// A slot is shared by the logs whose keys hash to it: a bump for another log
// costs a needless read, never a missed one. Followers on other gateways do
// without it.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept;      // postconfiguration
void live_board_attach(ngx_cycle_t* cycle) noexcept;    // init_process

ngx_uint_t live_board_slot(std::string_view key) noexcept;
// The slot's generation (0 without the board).
ngx_atomic_uint_t live_board_read(ngx_uint_t slot) noexcept;
void live_board_bump(ngx_uint_t slot) noexcept;

}  // namespace idem
