// settle_watch.hpp — a worker's watch on the live board's settles
// (live_board.hpp): whoever waits for a key's original in this worker (a
// wait group, wait.cpp) is told within about a millisecond when the key's
// slot settled in any worker of this nginx, rather than at its next look.
// Owns: which slots have watchers, what each slot's settles were when last
// seen, the one tick that looks while there are watchers. Must not touch:
// the watchers themselves (it calls what they registered).
#pragma once

#include "ngx.hpp"

namespace idem {

struct SettleWatch {
    void (*settled)(SettleWatch* w);  // the slot settled since it was last seen
    ngx_queue_t link;                 // among its slot's watchers; empty when not watching
    ngx_uint_t slot;
};

// Starts watching `slot` (live_board_slot of the key); `seen`: the slot's
// settles when the watcher's interest began (a claim was sent). True when
// the slot settled since: the watcher's answer may be out of date already.
bool settle_watch(SettleWatch* w, ngx_uint_t slot, ngx_atomic_uint_t seen) noexcept;
void settle_unwatch(SettleWatch* w) noexcept;

}  // namespace idem
