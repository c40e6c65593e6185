// live_board.hpp — the gateway's board (docs/design.md#live-join,
// #in-flight), in a small shared memory zone of its own: two generations
// per slot, which a worker bumps so that the other workers of the same
// nginx, which look at the board every millisecond, act at once rather
// than on their next timer:
//   - a live log's, bumped each time the store took more of a log a
//     worker publishes: a feed that follows it reads the store now;
//   - a settle's, bumped each time the store settled a claim (a response
//     or its marker stored, a key released): the waiters for that key,
//     in every worker, look now (wait.cpp).
// A slot is chosen by a store key (a live log's by the store key of its
// response) and shared by the keys that fall on it: a bump for another key
// costs a needless read or look, never a missed one. Followers and waiters
// on other gateways do without it.
// A base helper (docs/design.md#layers): the stores bump settles, the
// feeds and the wait groups read them. Must not touch: anything but the
// generations.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

ngx_int_t live_board_add(ngx_conf_t* cf) noexcept;      // postconfiguration
void live_board_attach(ngx_cycle_t* cycle) noexcept;    // init_process

constexpr ngx_uint_t live_board_slots = 2048;
// The slot of a store key (key.hpp's derive_redis_key).
ngx_uint_t live_board_slot(std::string_view store_key) noexcept;
// The slot's live log generation (0 without the board).
ngx_atomic_uint_t live_board_read(ngx_uint_t slot) noexcept;
void live_board_bump(ngx_uint_t slot) noexcept;
// The slot's settle generation (0 without the board).
ngx_atomic_uint_t live_board_settles(ngx_uint_t slot) noexcept;
void live_board_settled(ngx_uint_t slot) noexcept;

}  // namespace idem
