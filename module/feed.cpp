// feed.cpp — see feed.hpp: the feed's life, the registry, the log as
// followers get it, and the telling.

#include "feed_parts.hpp"

#include <cstring>
#include <new>
#include <utility>

#include "live_board.hpp"
#include "request_ctx.hpp"

namespace idem {
namespace {

ngx_rbtree_t feeds;
ngx_rbtree_node_t feeds_sentinel;
bool feeds_ready = false;

constexpr const char* state_name(FeedState s)
{
    constexpr const char* names[] = {"following", "streaming", "opened",      "starting",
                                     "publishing", "ended",    "ended_early", "dropped"};
    return names[static_cast<unsigned>(s)];
}

constexpr const char* state_name(StoreCopy s)
{
    constexpr const char* names[] = {"none", "appending", "given_up"};
    return names[static_cast<unsigned>(s)];
}

Feed* feed_of(ngx_str_node_t* node)
{
    return reinterpret_cast<Feed*>(reinterpret_cast<char*>(node) - offsetof(Feed, node));
}

bool idle(const Feed* f)
{
    if (f->busy != 0 || f->publisher != nullptr || !ngx_queue_empty(&f->watchers) || !ngx_queue_empty(&f->joiners)) {
        return false;
    }
    // a publisher's log goes on to the store to its end, unless given up
    return !(f->copy == StoreCopy::appending && f->published < f->len);
}

void free_feed(Feed* f)
{
    f->call.abandon();
    if (f->went_live.posted) {
        ngx_delete_posted_event(&f->went_live);
    }
    if (f->telling.posted) {
        ngx_delete_posted_event(&f->telling);
    }
    if (f->next_read.timer_set) {
        ngx_del_timer(&f->next_read);
    }
    ngx_rbtree_delete(&feeds, &f->node.node);
    ngx_free(f->log);
    ngx_free(f);
}

// A follower may finish (and leave) while told, and so may others (streams
// of one HTTP/2 connection): each is taken from the untold list and put
// back before it is told.
void tell_now(Feed* f, bool head_came)
{
    f->busy++;
    if (head_came && cut_short(f)) {
        while (!ngx_queue_empty(&f->watchers)) {  // left to their wait for the record
            auto* ctx = ngx_queue_data(ngx_queue_head(&f->watchers), RequestCtx, follower.link);
            ngx_queue_remove(&ctx->follower.link);
            ctx->follower.feed = nullptr;
        }
    } else if (head_came) {
        while (!ngx_queue_empty(&f->watchers)) {
            auto* ctx = ngx_queue_data(ngx_queue_head(&f->watchers), RequestCtx, follower.link);
            ngx_queue_remove(&ctx->follower.link);
            ngx_queue_insert_tail(&f->joiners, &ctx->follower.link);
            ctx->follower.joined = true;
            ctx->follower.tell.ready(ctx);  // it joins, or leaves
        }
    }
    ngx_queue_t untold;
    ngx_queue_init(&untold);
    if (!ngx_queue_empty(&f->joiners)) {
        ngx_queue_add(&untold, &f->joiners);
        ngx_queue_init(&f->joiners);
    }
    while (!ngx_queue_empty(&untold)) {
        ngx_queue_t* q = ngx_queue_head(&untold);
        ngx_queue_remove(q);
        ngx_queue_insert_tail(&f->joiners, q);
        auto* ctx = ngx_queue_data(q, RequestCtx, follower.link);
        ctx->follower.tell.more(ctx);
    }
    f->busy--;
    free_if_idle(f);
}

void on_tell(ngx_event_t* ev)
{
    auto* f = static_cast<Feed*>(ev->data);
    bool head_came = std::exchange(f->head_to_tell, false);
    tell_now(f, head_came);
}

}  // namespace


void enter(Feed* f, FeedState next)
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed state %s -> %s (\"%V\")",
                   state_name(f->state), state_name(next), &f->node.str);
    f->state = next;
}

void enter(Feed* f, StoreCopy next)
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed store copy %s -> %s (\"%V\")",
                   state_name(f->copy), state_name(next), &f->node.str);
    f->copy = next;
}

bool has_ended(const Feed* f)
{
    return f->state == FeedState::ended || f->state == FeedState::ended_early;
}

bool cut_short(const Feed* f)
{
    return has_ended(f) && f->how != LiveEnd::complete;
}

void end_log(Feed* f, LiveEnd how)
{
    f->how = how;
    bool joinable = f->state == FeedState::streaming || f->state == FeedState::publishing;
    enter(f, joinable ? FeedState::ended : FeedState::ended_early);
}


std::string_view key_of(const Feed* f)
{
    return {reinterpret_cast<const char*>(f->node.str.data), f->node.str.len};
}

std::string_view live_key(RequestCtx* ctx, std::string_view token)
{
    auto* key = static_cast<u_char*>(ngx_pnalloc(ctx->request->pool, ctx->claim.key.len + 2 * token.size()));
    if (key == nullptr) {
        return {};
    }
    u_char* p = ngx_cpymem(key, ctx->claim.key.data, ctx->claim.key.len);
    p = ngx_hex_dump(p, reinterpret_cast<u_char*>(const_cast<char*>(token.data())), token.size());
    return {reinterpret_cast<char*>(key), static_cast<std::size_t>(p - key)};
}

Feed* find_feed(std::string_view key)
{
    if (!feeds_ready) {
        ngx_rbtree_init(&feeds, &feeds_sentinel, ngx_str_rbtree_insert_value);
        feeds_ready = true;
    }
    ngx_str_t str{key.size(), reinterpret_cast<u_char*>(const_cast<char*>(key.data()))};
    ngx_str_node_t* node = ngx_str_rbtree_lookup(&feeds, &str, ngx_crc32_long(str.data, str.len));
    return node != nullptr ? feed_of(node) : nullptr;
}

Feed* new_feed(RequestCtx* ctx, std::string_view key, FeedState first)
{
    void* memory = ngx_alloc(sizeof(Feed) + key.size(), ngx_cycle->log);
    if (memory == nullptr) {
        return nullptr;
    }
    auto* f = new (memory) Feed();
    auto* copy = reinterpret_cast<u_char*>(f + 1);
    ngx_memcpy(copy, key.data(), key.size());
    f->node.str = {key.size(), copy};
    f->node.node.key = ngx_crc32_long(copy, key.size());
    f->state = first;
    f->store = ctx->claim.store;
    f->conf = ctx->conf;
    f->fingerprint = ctx->fingerprint;
    ngx_queue_init(&f->watchers);
    ngx_queue_init(&f->joiners);
    f->progress = ngx_current_msec;
    f->grew = ngx_current_msec;
    // by its response's store key: a live key ends with its claim's holder,
    // the same for every key of a gateway
    f->slot = live_board_slot(view(ctx->claim.key));
    f->call.init(nullptr, f, ngx_cycle->log);  // the store bounds each operation (idempotency_redis_timeout)
    set_event(f->went_live, on_live, f, ngx_cycle->log);
    set_event(f->telling, on_tell, f, ngx_cycle->log);
    // not cancelable: a worker that exits gracefully lets its joiners finish
    set_event(f->next_read, on_next_read, f, ngx_cycle->log);
    ngx_rbtree_insert(&feeds, &f->node.node);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed \"%V\" begins %s", &f->node.str,
                   state_name(first));
    return f;
}

void free_if_idle(Feed* f)
{
    if (idle(f)) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed \"%V\" is done", &f->node.str);
        free_feed(f);
    }
}

void feeds_exit() noexcept
{
    while (feeds_ready && feeds.root != feeds.sentinel) {
        free_feed(feed_of(reinterpret_cast<ngx_str_node_t*>(ngx_rbtree_min(feeds.root, feeds.sentinel))));
    }
}


bool reserve_log(Feed* f, std::size_t more)
{
    std::size_t need = f->len + more;
    if (need <= f->capacity) {
        return true;
    }
    std::size_t capacity = ngx_max(ngx_max(f->capacity * 2, need), std::size_t{4096});
    auto* grown = static_cast<char*>(ngx_alloc(capacity, ngx_cycle->log));
    if (grown == nullptr) {
        return false;
    }
    if (f->len != 0) {
        std::memcpy(grown, f->log, f->len);
    }
    ngx_free(f->log);
    f->log = grown;
    f->capacity = capacity;
    return true;
}

bool take_in(Feed* f)
{
    bool head_came = false;
    while (!has_ended(f)) {
        LiveItem item;
        std::size_t at = f->good;
        LiveStep step = read_live({f->log, f->len}, f->good, f->read, item);
        if (step == LiveStep::more) {
            break;
        }
        if (step == LiveStep::item && item.kind == LiveItem::Kind::head && item.head.fingerprint != f->fingerprint) {
            step = LiveStep::bad;
        }
        if (step == LiveStep::bad) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "idempotency: the live log \"%V\" is not well formed at byte %uz: its followers are cut off",
                          &f->node.str, at);
            f->good = at;
            end_log(f, LiveEnd::aborted);
            break;
        }
        if (item.kind == LiveItem::Kind::head) {
            f->head_at = at == 0 ? live_start_size : at;  // the frame's, past the log's start
            f->head_len = f->good - f->head_at;
            if (f->state == FeedState::following) {
                enter(f, FeedState::streaming);  // a local log goes live after its first turn (on_live)
            }
            head_came = true;
        } else if (item.kind == LiveItem::Kind::end) {
            end_log(f, item.how);
        }
    }
    return head_came;
}

// Never from inside another request's filters or a store's reply: what
// came meanwhile is told at once.
void tell_followers(Feed* f, bool head_came)
{
    f->head_to_tell = f->head_to_tell || head_came;
    if (!f->telling.posted) {
        ngx_post_event(&f->telling, &ngx_posted_events);
    }
}

bool feed_has_head(const Feed* f) noexcept
{
    return f->state == FeedState::streaming || f->state == FeedState::publishing || f->state == FeedState::ended;
}

std::string_view feed_log(const Feed* f) noexcept
{
    return {f->log, f->good};
}

bool feed_ended(const Feed* f, LiveEnd& how) noexcept
{
    how = f->how;
    return has_ended(f);
}

Record feed_head(const Feed* f) noexcept
{
    return *decode_record({f->log + f->head_at + live_frame_overhead, f->head_len - live_frame_overhead});
}

}  // namespace idem
