// wait.cpp — see wait.hpp.

#include "wait.hpp"

#include <cstring>
#include <new>

#include "lease.hpp"
#include "live_board.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "request_ctx.hpp"
#include "settle_watch.hpp"
#include "store_factory.hpp"
#include "timing.hpp"

namespace idem {

struct WaitGroup {
    ngx_str_node_t node;   // str: the group's identity (location, fingerprint, Redis key)
    ngx_queue_t members;   // by Wait::link, in the order they came
    ngx_uint_t size;
    LocConf* conf;
    ClaimStore* store;
    Digest fingerprint;
    std::string_view key;  // the Redis key, the tail of the identity
    char* claim;           // the claim record the look is made with
    size_t claim_len;
    PendingOp* look;       // the look in flight, nullptr when none
    ngx_event_t next;      // the next look
    ngx_event_t timeout;   // the look's idempotency_redis_timeout
    ngx_msec_t delay;
    ngx_msec_t looked;     // when the last look was sent (0: none yet)
    ngx_msec_t lease_end;  // of a claim the look in flight is granted (lease.hpp)
    SettleWatch watch;     // on its key's slot of the live board (settle_watch.hpp)
    bool moved;            // the slot settled while the look was in flight
    bool answering;        // members are being answered: not freed meanwhile
};

namespace {

constexpr Backoff look_backoff{25, 500};  // ms: the first look after 25 ms, the delay doubling up to 500 ms
constexpr ngx_msec_t first_look_delay = look_backoff.first;
ngx_rbtree_t groups;
ngx_rbtree_node_t groups_sentinel;
bool groups_ready = false;
LogLimiter timeout_log;

void look(WaitGroup* g) noexcept;

// After whatever runs now (the settles' walk, an answer to the members).
void look_soon(WaitGroup* g) noexcept
{
    if (g->look != nullptr) {
        return;
    }
    if (g->next.timer_set) {
        ngx_del_timer(&g->next);
    }
    ngx_add_timer(&g->next, 0);
}

WaitGroup* group_of_watch(SettleWatch* w)
{
    return reinterpret_cast<WaitGroup*>(reinterpret_cast<char*>(w) - offsetof(WaitGroup, watch));
}

// A group whose look is in flight looks again if that look finds the
// original still in flight: it may have reached the store before the settle.
void on_settled(SettleWatch* w)
{
    WaitGroup* g = group_of_watch(w);
    if (g->look != nullptr) {
        g->moved = true;
    } else {
        look_soon(g);
    }
}

WaitGroup* group_of(ngx_str_node_t* node)
{
    return reinterpret_cast<WaitGroup*>(reinterpret_cast<char*>(node) - offsetof(WaitGroup, node));
}

RequestCtx* first_member(WaitGroup* g)
{
    return ngx_queue_data(ngx_queue_head(&g->members), RequestCtx, wait.link);
}

void on_next_look(ngx_event_t* ev)
{
    look(static_cast<WaitGroup*>(ev->data));
}

void free_group(WaitGroup* g) noexcept
{
    if (g->next.timer_set) {
        ngx_del_timer(&g->next);
    }
    if (g->timeout.timer_set) {
        ngx_del_timer(&g->timeout);
    }
    if (g->look != nullptr) {
        g->store->abandon(g->look);  // a look granted the claim after all is released by the store
    }
    settle_unwatch(&g->watch);
    ngx_rbtree_delete(&groups, &g->node.node);
    ngx_free(g);
}

void leave(RequestCtx* ctx) noexcept
{
    WaitGroup* g = ctx->wait.group;
    ngx_queue_remove(&ctx->wait.link);
    g->size--;
    ctx->wait.group = nullptr;
    ctx->wait.due = false;
    if (ctx->wait.timer.timer_set) {
        ngx_del_timer(&ctx->wait.timer);
    }
}

// The group stays allocated through the answer: its request may finish
// other members.
void answer(WaitGroup* g, RequestCtx* ctx, const ClaimResult& result, const LookGrant* grant = nullptr) noexcept
{
    leave(ctx);
    if (result.outcome != Outcome::conflict) {
        observe_wait(ngx_current_msec - (ctx->wait.deadline - ctx->conf->wait));
    } else {
        count(Counter::wait_timeouts);  // its wait ran out with the original still in flight: 409
    }
    bool outer = g->answering;
    g->answering = true;
    ctx->wait.answer(ctx, result, grant);
    g->answering = outer;
}

// Unless a look is in flight already: a member just answered may have
// settled at once and woken the group.
void look_later(WaitGroup* g, ngx_msec_t delay) noexcept
{
    g->delay = delay;
    if (g->look == nullptr) {
        ngx_add_timer(&g->next, delay);
    }
}

void free_if_empty(WaitGroup* g) noexcept
{
    if (g->size == 0 && !g->answering) {
        free_group(g);
    }
}

void answer_all(WaitGroup* g, const ClaimResult& result) noexcept
{
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: the look at \"%*s\" answers every waiting request",
                   g->key.size(), g->key.data());
    // Only the last member may take the store's block over: a member's pool
    // may be freed during its answer while the others still copy from it.
    ClaimResult copied = result;
    copied.bytes = nullptr;
    while (!ngx_queue_empty(&g->members)) {
        bool last = ngx_queue_next(ngx_queue_head(&g->members)) == ngx_queue_sentinel(&g->members);
        answer(g, first_member(g), last ? result : copied);
    }
    free_if_empty(g);
}

// Or the look timed out: members whose wait ran out get `result` (409, 503).
void still_in_flight(WaitGroup* g, const ClaimResult& result) noexcept
{
    ngx_queue_t* q = ngx_queue_head(&g->members);
    while (q != ngx_queue_sentinel(&g->members)) {
        RequestCtx* ctx = ngx_queue_data(q, RequestCtx, wait.link);
        q = ngx_queue_next(q);
        if (ctx->wait.due) {
            answer(g, ctx, result);
        }
    }
    if (g->size == 0) {
        free_if_empty(g);
        return;
    }
    if (g->moved) {
        look_soon(g);  // the original settled since the look left: it may have found the claim still there
        return;
    }
    look_later(g, static_cast<ngx_msec_t>(look_backoff.after(g->delay)));
}

// The first member becomes the new original with the look's claim record
// (all claim records have the same size); the others wait on for it.
void granted(WaitGroup* g, const ClaimResult& result) noexcept
{
    LookGrant grant{{g->claim, g->claim_len}, g->lease_end};
    answer(g, first_member(g), result, &grant);
    if (g->size == 0) {
        free_if_empty(g);
        return;
    }
    look_later(g, first_look_delay);
}

void on_look_answer(void* data, const ClaimResult& result)
{
    auto* g = static_cast<WaitGroup*>(data);
    g->look = nullptr;
    if (g->timeout.timer_set) {
        ngx_del_timer(&g->timeout);
    }
    if (result.outcome == Outcome::conflict) {
        still_in_flight(g, result);
    } else if (result.outcome == Outcome::fresh) {
        granted(g, result);
    } else {
        answer_all(g, result);
    }
}

void on_look_timeout(ngx_event_t* ev)
{
    auto* g = static_cast<WaitGroup*>(ev->data);
    count(Counter::redis_timeouts);
    if (timeout_log.admit()) {
        ngx_log_error(NGX_LOG_ERR, ev->log, 0,
                      "idempotency: Redis did not answer a look for waiting requests within %M ms "
                      "(%ui since the last line)",
                      g->conf->redis_timeout, timeout_log.take());
    }
    g->store->abandon(g->look);
    g->look = nullptr;
    // The look's deadline passed, not the members': a stalling Redis answers
    // a later look; a gone one fails it at once.
    still_in_flight(g, {Outcome::unavailable, nullptr, {}});
}

void look(WaitGroup* g) noexcept
{
    if (g->next.timer_set) {
        ngx_del_timer(&g->next);
    }
    if (g->look != nullptr) {
        return;  // its answer answers everyone
    }
    LocConf* conf = g->conf;
    RequestCtx* first = first_member(g);
    std::memcpy(g->claim, first->claim.record.data, g->claim_len);
    g->looked = ngx_current_msec;
    g->moved = false;
    g->lease_end = lease_end(ngx_current_msec, conf->lock_ttl, conf->redis_timeout);
    ClaimWaiter waiter = location_waiter(*conf, on_look_answer, g, g->fingerprint);
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "idempotency: looking again at \"%*s\" for %ui waiting requests", g->key.size(), g->key.data(),
                   g->size);
    g->look = g->store->claim(g->key, {g->claim, g->claim_len}, conf->lock_ttl, waiter);
    if (g->look == nullptr) {
        answer_all(g, {Outcome::unavailable, nullptr, {}});
        return;
    }
    ngx_add_timer(&g->timeout, conf->redis_timeout);
}

// The answer of the look in flight, of one started now, or, when the last
// look is only just sent, 409 at once.
void on_wait_over(ngx_event_t* ev)
{
    auto* ctx = static_cast<RequestCtx*>(ev->data);
    WaitGroup* g = ctx->wait.group;
    ctx->wait.due = true;
    if (g->look != nullptr) {
        return;
    }
    if (g->looked != 0 && ngx_current_msec - g->looked < first_look_delay) {
        answer(g, ctx, {Outcome::conflict, nullptr, {}});
        free_if_empty(g);
        return;
    }
    look(g);
}

// In `room` when it fits (always, with the default prefix), else ngx_alloc'd:
// an original may settle from its pool's cleanup.
struct Identity {
    ngx_str_t str;
    uint32_t hash;
    u_char room[256];

    explicit Identity(const RequestCtx* ctx) noexcept
    {
        str.len = sizeof(LocConf*) + sizeof(Digest) + ctx->claim.key.len;
        str.data = str.len <= sizeof(room) ? room : static_cast<u_char*>(ngx_alloc(str.len, ngx_cycle->log));
        if (str.data != nullptr) {
            u_char* p = ngx_cpymem(str.data, &ctx->conf, sizeof(LocConf*));
            p = ngx_cpymem(p, ctx->fingerprint.data(), sizeof(Digest));
            ngx_memcpy(p, ctx->claim.key.data, ctx->claim.key.len);
            hash = ngx_murmur_hash2(str.data, str.len);
        }
    }
    ~Identity()
    {
        if (str.data != room) {
            ngx_free(str.data);
        }
    }
    Identity(const Identity&) = delete;
    Identity& operator=(const Identity&) = delete;

    WaitGroup* group() noexcept
    {
        ngx_str_node_t* node = ngx_str_rbtree_lookup(&groups, &str, hash);
        return node != nullptr ? group_of(node) : nullptr;
    }
};

WaitGroup* new_group(RequestCtx* ctx, const Identity& identity) noexcept
{
    const ngx_str_t& id = identity.str;
    void* memory = ngx_alloc(sizeof(WaitGroup) + id.len + ctx->claim.record.len, ngx_cycle->log);
    if (memory == nullptr) {
        return nullptr;
    }
    auto* g = new (memory) WaitGroup();
    auto* copy = reinterpret_cast<u_char*>(g + 1);
    ngx_memcpy(copy, id.data, id.len);
    g->node.str = {id.len, copy};
    g->node.node.key = identity.hash;
    ngx_queue_init(&g->members);
    g->conf = ctx->conf;
    g->store = ctx->claim.store;
    g->fingerprint = ctx->fingerprint;
    g->key = {reinterpret_cast<char*>(copy + id.len - ctx->claim.key.len), ctx->claim.key.len};
    g->claim = reinterpret_cast<char*>(copy + id.len);
    g->claim_len = ctx->claim.record.len;
    g->delay = first_look_delay;
    set_event(g->next, on_next_look, g, ngx_cycle->log);
    set_event(g->timeout, on_look_timeout, g, ngx_cycle->log);
    ngx_rbtree_insert(&groups, &g->node.node);
    g->watch.settled = on_settled;
    // settled between this member's claim and now: its answer may be out of date
    ngx_add_timer(&g->next, settle_watch(&g->watch, live_board_slot(g->key), ctx->claim.settles_seen) ? 0 : g->delay);
    return g;
}

bool join(RequestCtx* ctx) noexcept
{
    if (!groups_ready) {
        ngx_rbtree_init(&groups, &groups_sentinel, ngx_str_rbtree_insert_value);
        groups_ready = true;
    }
    Identity id(ctx);
    if (id.str.data == nullptr) {
        return false;
    }
    WaitGroup* g = id.group();
    if (g == nullptr) {
        g = new_group(ctx, id);
    }
    if (g == nullptr) {
        return false;
    }
    ngx_queue_insert_tail(&g->members, &ctx->wait.link);
    g->size++;
    ctx->wait.group = g;
    ngx_log_t* log = ctx->request->connection->log;
    set_event(ctx->wait.timer, on_wait_over, ctx, log);
    ngx_add_timer(&ctx->wait.timer, ctx->wait.deadline - ngx_current_msec);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: waiting for the original of \"%V\" (%ui waiting)",
                   &ctx->claim.key, g->size);
    return true;
}

}  // namespace

bool wait_for_original(RequestCtx* ctx, WaitAnswer answered) noexcept
{
    LocConf* conf = ctx->conf;
    if (conf->wait == 0) {
        return false;
    }
    ctx->wait.answer = answered;
    if (!ctx->wait.waited) {
        ctx->wait.waited = true;
        ctx->wait.deadline = ngx_current_msec + conf->wait;
    }
    if (ngx_current_msec >= ctx->wait.deadline) {
        return false;
    }
    return ctx->wait.group != nullptr || join(ctx);
}

void wake_waiters(RequestCtx* original) noexcept
{
    if (!groups_ready || groups.root == groups.sentinel) {
        return;
    }
    Identity id(original);
    WaitGroup* g = id.str.data != nullptr ? id.group() : nullptr;
    if (g == nullptr) {
        return;
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, original->request->connection->log, 0,
                   "idempotency: the original of \"%V\" is settled: its waiters look now", &original->claim.key);
    look(g);
}

void stop_waiting(RequestCtx* ctx) noexcept
{
    WaitGroup* g = ctx->wait.group;
    if (g != nullptr) {
        leave(ctx);
        free_if_empty(g);
    }
}

}  // namespace idem
