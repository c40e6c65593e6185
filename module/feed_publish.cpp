// feed_publish.cpp — an original of this worker publishes its feed, and once
// live appends its log to the store. Owns the publishing states and
// StoreCopy; must not touch the capture's record nor the claim.

#include <cstring>

#include "feed_parts.hpp"
#include "live_board.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "request_ctx.hpp"

namespace idem {
namespace {

// For followers still reading it.
constexpr std::uint64_t ended_log_ttl_ms = 10000;

LogLimiter append_log;

void flush(Feed* f);

void on_appended(void* data, LiveStatus status, std::string_view)
{
    auto* f = static_cast<Feed*>(data);
    f->call.answered();
    if (status == LiveStatus::done) {
        f->published += f->sending;
        f->sending = 0;
        live_board_bump(f->slot);  // followers in the other workers read it now
        if (has_ended(f) && f->published == f->len) {
            f->store->live_expire(key_of(f), ngx_max(ended_log_ttl_ms, std::uint64_t{f->conf->lock_ttl}));
        }
        flush(f);
        free_if_idle(f);
        return;
    }
    enter(f, StoreCopy::given_up);
    count(Counter::live_logs_given_up);
    if (append_log.admit()) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "idempotency: the live log \"%V\" could not be appended to (%s): its followers elsewhere are "
                      "cut off (%ui since the last line)",
                      &f->node.str, status == LiveStatus::gone ? "it is not where it was left" : "the store failed",
                      append_log.take());
    }
    f->store->live_expire(key_of(f), 0);
    free_if_idle(f);
}

// One append in flight at a time.
void flush(Feed* f)
{
    if (f->copy != StoreCopy::appending || f->call.pending() || f->published == f->len) {
        return;
    }
    f->sending = f->len - f->published;
    std::uint64_t ttl = f->conf->lock_ttl;  // the first append's; the renewals extend it, the end sets its last
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: appending %uz bytes to the live log \"%V\" at %uz",
                   f->sending, &f->node.str, f->published);
    LiveOp* op = f->store->live_append(key_of(f), f->published, {f->log + f->published, f->sending}, ttl, on_appended, f);
    if (!f->call.await(f->store, op, 0)) {
        // Given up at once. The caller goes on with f (tells, then frees if
        // idle): f must outlive this, even with no follower left.
        f->busy++;
        on_appended(f, LiveStatus::failed, {});
        f->busy--;
    }
}

bool add_frame(Feed* f, std::size_t size)
{
    if (!reserve_log(f, size)) {
        end_log(f, LiveEnd::aborted);  // out of memory: its followers are cut off
        return false;
    }
    return true;
}

bool add_body(Feed* f, std::string_view bytes)
{
    if (!add_frame(f, live_frame_overhead + bytes.size())) {
        return false;
    }
    char* to = encode_live_body_header(f->log + f->len, bytes.size());
    std::memcpy(to, bytes.data(), bytes.size());
    f->len = static_cast<std::size_t>(to - f->log) + bytes.size();
    take_in(f);
    return true;
}

}  // namespace

// Most responses end in the turn they began in; those are answered from the
// store as a whole and never publish a log.
void on_live(ngx_event_t* ev)
{
    auto* f = static_cast<Feed*>(ev->data);
    if (f->state == FeedState::starting) {
        enter(f, FeedState::publishing);
    }
    if (f->conf->seal_keys == nullptr) {  // with encryption at rest nothing goes to the store
        enter(f, StoreCopy::appending);
    }
    // Until now the body went to the capture alone: the feed takes it over.
    std::string_view body = f->publisher != nullptr ? captured_body(f->publisher) : std::string_view{};
    if (!body.empty()) {
        add_body(f, body);
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: the response published as \"%V\" is live",
                   &f->node.str);
    flush(f);
    tell_followers(f, true);
}

Feed* feed_open(RequestCtx* ctx) noexcept
{
    if (ctx->conf->wait == 0) {
        return nullptr;
    }
    std::optional<Record> claim = decode_record(view(ctx->claim.record));
    std::string_view live = live_key(ctx, claim->token);
    if (live.empty()) {
        return nullptr;
    }
    Feed* f = find_feed(live);
    if (f != nullptr) {
        make_local(f);
    } else if ((f = new_feed(ctx, live, FeedState::opened)) == nullptr) {
        return nullptr;
    }
    f->conf = ctx->conf;
    f->publisher = ctx;
    return f;
}

void feed_publish(Feed* f, RequestCtx* ctx, std::uint16_t status, const Header* headers, std::size_t count,
                  const ResponseExtras& extras) noexcept
{
    if (f->state != FeedState::opened || (extras.flags & expect_trailers) != 0) {
        return;  // a response with trailers is not joined: its duplicates get it whole from the store
    }
    std::size_t head = live_head_size(headers, count, extras);
    if (head == 0 || !reserve_log(f, live_start_size + head)) {
        return;  // nothing was published: the waiters go on waiting for the store
    }
    f->len += encode_live_start(f->log);
    f->len += encode_live_head(f->log + f->len, ctx->fingerprint, status, headers, count, extras);
    enter(f, FeedState::starting);
    take_in(f);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "idempotency: publishing the response to \"%V\" under \"%V\"", &ctx->claim.key, &f->node.str);
    ngx_post_event(&f->went_live, &ngx_posted_events);
}

void feed_body(Feed* f, std::string_view bytes) noexcept
{
    if (f->state != FeedState::publishing || bytes.empty()) {
        return;  // before it is live, the body is kept by the capture alone (on_live)
    }
    if (add_body(f, bytes)) {
        flush(f);
    }
    tell_followers(f, false);
}

void feed_end(Feed* f, LiveEnd how) noexcept
{
    f->publisher = nullptr;
    if (f->state != FeedState::starting && f->state != FeedState::publishing) {
        if (f->state == FeedState::ended) {  // cut off already (out of memory)
            tell_followers(f, false);
            return;
        }
        if (f->state == FeedState::opened) {
            enter(f, FeedState::dropped);
        }
        free_if_idle(f);
        return;
    }
    if (add_frame(f, live_end_size)) {
        f->len += encode_live_end(f->log + f->len, how);
        take_in(f);
    }
    if (f->went_live.posted) {
        // ended in the turn it began: its followers get it from the store
        ngx_delete_posted_event(&f->went_live);
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: the live response \"%V\" ended (%d)",
                   &f->node.str, static_cast<int>(how));
    flush(f);
    tell_followers(f, false);
}

void feed_renew(Feed* f) noexcept
{
    if (f->copy == StoreCopy::appending && f->state == FeedState::publishing) {
        f->store->live_expire(key_of(f), f->conf->lock_ttl);
    }
}

}  // namespace idem
