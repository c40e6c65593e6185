// settle_watch.cpp — see settle_watch.hpp.

#include "settle_watch.hpp"

#include "live_board.hpp"

namespace idem {
namespace {

// An original settled in another worker is looked for at once, not at the
// waiters' next look.
constexpr ngx_msec_t tick = 1;

// ngx_alloc'd with the first watcher, kept for the worker's life; without it
// watchers only look on their own schedule.
struct Slot {
    ngx_queue_t watchers;  // by SettleWatch::link
    ngx_queue_t busy;      // in busy_slots while it has watchers: the tick walks those alone
    ngx_atomic_uint_t seen;
};

Slot* slots = nullptr;
ngx_queue_t busy_slots;
ngx_uint_t watchers = 0;
ngx_event_t tick_event;

void on_tick(ngx_event_t*)
{
    for (ngx_queue_t* b = ngx_queue_head(&busy_slots); b != ngx_queue_sentinel(&busy_slots); b = ngx_queue_next(b)) {
        Slot& s = *ngx_queue_data(b, Slot, busy);
        ngx_atomic_uint_t now = live_board_settles(static_cast<ngx_uint_t>(&s - slots));
        if (now == s.seen) {
            continue;
        }
        s.seen = now;
        // a watcher told may look, never leave, while it is told
        for (ngx_queue_t* q = ngx_queue_head(&s.watchers); q != ngx_queue_sentinel(&s.watchers); q = ngx_queue_next(q)) {
            SettleWatch* w = ngx_queue_data(q, SettleWatch, link);
            w->settled(w);
        }
    }
    if (watchers != 0) {
        ngx_add_timer(&tick_event, tick);
    }
}

}  // namespace

bool settle_watch(SettleWatch* w, ngx_uint_t slot, ngx_atomic_uint_t seen) noexcept
{
    ngx_queue_init(&w->link);
    w->slot = slot;
    if (slots == nullptr) {
        slots = static_cast<Slot*>(ngx_alloc(sizeof(Slot) * live_board_slots, ngx_cycle->log));
        if (slots == nullptr) {
            return false;
        }
        for (ngx_uint_t i = 0; i < live_board_slots; i++) {
            ngx_queue_init(&slots[i].watchers);
        }
        ngx_queue_init(&busy_slots);
        set_event(tick_event, on_tick, slots, ngx_cycle->log, true);  // data: never nullptr (the debug log reads it)
    }
    Slot& s = slots[slot];
    ngx_atomic_uint_t now = live_board_settles(slot);
    if (ngx_queue_empty(&s.watchers)) {
        s.seen = now;
        ngx_queue_insert_tail(&busy_slots, &s.busy);
    }
    ngx_queue_insert_tail(&s.watchers, &w->link);
    watchers++;
    if (!tick_event.timer_set) {
        ngx_add_timer(&tick_event, tick);
    }
    return now != seen;
}

void settle_unwatch(SettleWatch* w) noexcept
{
    if (ngx_queue_empty(&w->link)) {
        return;  // not watching: the slots could not be had
    }
    ngx_queue_remove(&w->link);
    ngx_queue_init(&w->link);
    Slot& s = slots[w->slot];
    if (ngx_queue_empty(&s.watchers)) {
        ngx_queue_remove(&s.busy);
    }
    watchers--;
}

}  // namespace idem
