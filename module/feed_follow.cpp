// feed_follow.cpp — requests following a feed, and a feed following its
// original's log in the store: quickly while bytes flow, slowly while they
// do not, sooner when the live board says this nginx appended. Owns the
// following states and Follower; must not touch the publisher's side.

#include <cstring>

#include "feed_parts.hpp"
#include "live_board.hpp"
#include "log_limit.hpp"
#include "pieces.hpp"
#include "request_ctx.hpp"

namespace idem {
namespace {

// Before the head, as often as a wait group looks (wait.cpp).
constexpr ngx_msec_t read_first = 2;
constexpr ngx_msec_t read_streaming_max = 8;
constexpr ngx_msec_t read_waiting_first = 25;
constexpr ngx_msec_t read_waiting_max = 500;
// A log published in another worker of this nginx is read as soon as it grew.
constexpr ngx_msec_t board_tick = 1;
// Then it is read in a way that tells whether it is gone (its gateway died).
constexpr ngx_msec_t gone_check_after = 1000;

LogLimiter read_fail_log;

// Body up to idempotency_max_response_size (or the first piece), the head and
// frame overhead; a publisher of many small frames makes the log longer.
std::size_t log_limit(const LocConf* conf)
{
    return 6 * capture_limit(conf->max_response_size, conf->piece_size) + 2 * max_record_header_bytes + 64 * 1024;
}

void read_later(Feed* f, bool grew)
{
    bool streaming = f->state == FeedState::streaming;
    ngx_msec_t first = streaming ? read_first : read_waiting_first;
    ngx_msec_t most = streaming ? read_streaming_max : read_waiting_max;
    f->read_delay = grew ? first : ngx_min(ngx_max(f->read_delay * 2, first), most);
    f->read_due = ngx_current_msec + f->read_delay;
    ngx_add_timer(&f->next_read, streaming ? ngx_min(board_tick, f->read_delay) : f->read_delay);
}

void cut_off(Feed* f, const char* why)
{
    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0, "idempotency: the live log \"%V\" %s: its followers are cut off",
                  &f->node.str, why);
    end_log(f, LiveEnd::aborted);
}

void on_read(void* data, LiveStatus status, std::string_view bytes)
{
    auto* f = static_cast<Feed*>(data);
    f->call.answered();
    bool grew = false;
    switch (status) {
    case LiveStatus::done:
        f->progress = ngx_current_msec;
        if (bytes.empty()) {
            break;
        }
        if (f->len + bytes.size() > log_limit(f->conf) || !reserve_log(f, bytes.size())) {
            cut_off(f, "is longer than a live log holds (idempotency_max_response_size, or one piece)");
            break;
        }
        std::memcpy(f->log + f->len, bytes.data(), bytes.size());
        f->len += bytes.size();
        f->grew = ngx_current_msec;
        grew = true;
        break;
    case LiveStatus::gone:
        f->progress = ngx_current_msec;
        if (f->len != 0) {
            cut_off(f, "is gone from the store before its end");
        }
        break;
    case LiveStatus::failed:
    case LiveStatus::lost:
        if (ngx_current_msec - f->progress > f->conf->lock_ttl) {
            cut_off(f, "could not be read for idempotency_lock_ttl");
        } else if (read_fail_log.admit()) {
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "idempotency: the live log \"%V\" could not be read; trying again (%ui since the last line)",
                          &f->node.str, read_fail_log.take());
        }
        break;
    }
    bool head_came = grew && take_in(f);
    if (!has_ended(f)) {
        read_later(f, grew);
    }
    if (grew || has_ended(f)) {
        tell_followers(f, head_came);
    } else {
        free_if_idle(f);
    }
}

void read_log(Feed* f)
{
    f->seen = live_board_read(f->slot);
    bool may_be_gone = f->len != 0 && ngx_current_msec - f->grew >= gone_check_after;
    if (!f->call.await(f->store, f->store->live_read(key_of(f), f->len, may_be_gone, on_read, f), 0)) {
        on_read(f, LiveStatus::failed, {});
    }
}

}  // namespace

// Due, or the board says the slot grew (maybe another log: a needless read).
void on_next_read(ngx_event_t* ev)
{
    auto* f = static_cast<Feed*>(ev->data);
    if (f->state == FeedState::streaming && live_board_read(f->slot) == f->seen
        && static_cast<ngx_msec_int_t>(f->read_due - ngx_current_msec) > 0) {
        ngx_add_timer(&f->next_read, board_tick);
        return;
    }
    read_log(f);
}

// The claim was granted to a request of this worker after all.
void make_local(Feed* f)
{
    f->call.abandon();
    if (f->next_read.timer_set) {
        ngx_del_timer(&f->next_read);
    }
    f->len = 0;
    f->good = 0;
    f->read = {};
    enter(f, FeedState::opened);
}

bool feed_follow(RequestCtx* ctx, std::string_view claim, FeedTell tell) noexcept
{
    std::optional<Record> original = decode_record(claim);
    if (!original || original->kind != RecordKind::claim) {
        return false;
    }
    std::string_view live = live_key(ctx, original->token);
    if (live.empty()) {
        return false;
    }
    Feed* f = find_feed(live);
    if (f != nullptr && cut_short(f)) {
        feed_leave(ctx);
        return false;  // no join: the request waits for the record
    }
    if (ctx->follower.feed != nullptr && ctx->follower.feed != f) {
        feed_leave(ctx);  // the original it followed was released; another took its place
    }
    if (ctx->follower.feed == f && f != nullptr) {
        return feed_has_head(f);
    }
    if (f == nullptr) {
        if (ctx->conf->seal_keys != nullptr || ctx->claim.store == nullptr) {
            return false;  // with encryption at rest nothing is published to follow
        }
        f = new_feed(ctx, live, FeedState::following);
        if (f == nullptr) {
            return false;
        }
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                       "idempotency: following the live log \"%V\" in the store", &f->node.str);
    }
    ctx->follower = {f, {}, false, tell};
    ngx_queue_insert_tail(&f->watchers, &ctx->follower.link);
    bool reading = f->state == FeedState::following || f->state == FeedState::streaming;
    if (reading && !f->call.pending() && !f->next_read.timer_set) {
        read_log(f);  // its answer comes later, at the earliest on the next turn
    }
    return feed_has_head(f);
}

void feed_attach(RequestCtx* ctx) noexcept
{
    Follower& follower = ctx->follower;
    if (!follower.joined) {
        ngx_queue_remove(&follower.link);
        ngx_queue_insert_tail(&follower.feed->joiners, &follower.link);
        follower.joined = true;
    }
}

void feed_leave(RequestCtx* ctx) noexcept
{
    Feed* f = ctx->follower.feed;
    if (f == nullptr) {
        return;
    }
    ngx_queue_remove(&ctx->follower.link);
    ctx->follower.feed = nullptr;
    ctx->follower.joined = false;
    free_if_idle(f);
}

}  // namespace idem
