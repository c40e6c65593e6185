// settle_watch.hpp — a worker's watch on the live board's settles, so a wait
// group learns within about a millisecond that its key's slot settled in
// any worker. Owns the watched slots, their last-seen settles and the one
// tick; must not touch the watchers (it calls what they registered).
#pragma once

#include "ngx.hpp"

namespace idem {

struct SettleWatch {
    void (*settled)(SettleWatch* w);  // the slot settled since it was last seen
    ngx_queue_t link;                 // among its slot's watchers; empty when not watching
    ngx_uint_t slot;
};

// `seen`: the slot's settles when the claim was sent. True when it settled
// since: the watcher's answer may be out of date already.
bool settle_watch(SettleWatch* w, ngx_uint_t slot, ngx_atomic_uint_t seen) noexcept;
void settle_unwatch(SettleWatch* w) noexcept;

}  // namespace idem
