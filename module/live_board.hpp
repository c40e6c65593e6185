// live_board.hpp — the gateway's board in a small shared zone: per slot, a
// live log's and a settle's generation, bumped so the other workers (which
// look every millisecond) act at once rather than on their next timer: a
// feed reads the store now; a key's waiters look now. Keys share slots: a
// bump for another key costs a needless read, never a missed one. Other
// gateways do without it. A base helper: the stores bump, feeds and waits
// read. See docs/design.md#live-join and docs/design.md#layers.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept;      // postconfiguration
void live_board_attach(ngx_cycle_t* cycle) noexcept;    // init_process

constexpr ngx_uint_t live_board_slots = 2048;
// By the store key (key.hpp's derive_redis_key); a live log's is its response's.
ngx_uint_t live_board_slot(std::string_view store_key) noexcept;
// 0 without the board.
ngx_atomic_uint_t live_board_read(ngx_uint_t slot) noexcept;
void live_board_bump(ngx_uint_t slot) noexcept;
// 0 without the board.
ngx_atomic_uint_t live_board_settles(ngx_uint_t slot) noexcept;
void live_board_settled(ngx_uint_t slot) noexcept;

}  // namespace idem
