// feed.cpp — see feed.hpp.

#include "feed.hpp"

#include <cstring>
#include <new>
#include <utility>

#include "live_board.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "pieces.hpp"
#include "request_ctx.hpp"
#include "send.hpp"
#include "store_call.hpp"
#include "timing.hpp"

namespace idem {

// Where a feed is in its life. Each transition is one call to enter(),
// which logs the old and the new state at debug level, as the request's
// does (request_ctx.hpp), so that a debug log shows each feed's path:
//
//   its original elsewhere, its log read from the store:
//     following -> streaming -> ended
//     following -> ended_early
//   its original in this worker, its log written by the capture:
//     opened -> starting -> publishing -> ended
//     opened -> dropped
//     starting -> ended_early
//   following, streaming, ended, ended_early -> opened
//
//   following    the store's log is read; its head has not come: -> streaming
//                when it comes, -> ended_early when the log is cut off first.
//   streaming    the head was read: followers join; the log is read on to its
//                end: -> ended.
//   opened       its original holds it, nothing is published yet: -> starting
//                when the head is written, -> dropped when the original lets
//                go first. A feed that followed the store comes here too when
//                its original turns out to be a request of this worker (the
//                claim granted here after all): what it read is dropped.
//   starting     the head is written; the feed goes live once the event-loop
//                turn its response began in is over: -> publishing; a
//                response that ends within that turn: -> ended_early.
//   publishing   live: followers join, each piece is added as the client gets
//                it, and the log goes to the store (StoreCopy): -> ended.
//   ended        the log has its end (whole, cut, or cut off: `how`) and
//                followers could join before it.
//   ended_early  ended before any follower could join: the watchers wait on
//                for the stored response.
//   dropped      its original let go without publishing anything.
// A feed is freed once nothing is left to do with it (idle()), whatever its
// state.
enum class FeedState : std::uint8_t {
    following,
    streaming,
    opened,
    starting,
    publishing,
    ended,
    ended_early,
    dropped,
};

// The log's copy in the store, for followers in other workers and gateways.
// It has a life of its own beside the feed's: a feed that ended may still
// be appending, a publishing one may have given its copy up.
//   none -> appending -> given_up
enum class StoreCopy : std::uint8_t {
    none,       // nothing appended: not live yet, or never (encryption at rest, a log read from the store)
    appending,  // from going live to the log's end, one append in flight at a time
    given_up,   // an append failed: the store's log is dropped, its followers elsewhere cut off
};

constexpr const char* state_name(FeedState s) noexcept
{
    constexpr const char* names[] = {"following", "streaming", "opened",      "starting",
                                     "publishing", "ended",    "ended_early", "dropped"};
    return names[static_cast<unsigned>(s)];
}

constexpr const char* state_name(StoreCopy s) noexcept
{
    constexpr const char* names[] = {"none", "appending", "given_up"};
    return names[static_cast<unsigned>(s)];
}

struct Feed {
    ngx_str_node_t node;    // str: the live key, copied after the feed
    FeedState state;        // enter() alone writes it
    StoreCopy copy;         // enter() alone writes it
    Store* store;
    LocConf* conf;          // the publisher's, or the first follower's
    Digest fingerprint;
    ngx_queue_t watchers;   // by Follower::link: waiting for the head
    ngx_queue_t joiners;    // by Follower::link: sent each byte as it comes
    char* log;              // ngx_alloc'd: the live log as far as it is known
    std::size_t len;
    std::size_t capacity;
    std::size_t good;       // read and found well formed: what followers are given
    LiveReadState read;
    std::size_t head_at;    // the head record's place in the log
    std::size_t head_len;
    LiveEnd how;            // once ended
    // Plain fields, not phases: whether the original still holds the feed is
    // apart from the state (one cut off while held is ended already); what
    // the store has and the reads' pacing are data; a telling pending and a
    // feed in use (busy) come in any state.
    RequestCtx* publisher;  // the original, while it holds the feed
    std::size_t published;  // how much of the log the store has
    std::size_t sending;    // the append in flight: how much
    StoreCall call;         // the append or the read in flight
    ngx_event_t went_live;  // posted: the turn the response began in is over
    ngx_event_t telling;    // posted: the followers are told what came
    bool head_to_tell;      // ... and the watchers that the head came
    ngx_event_t next_read;  // following the store: the next read
    ngx_msec_t read_delay;
    ngx_msec_t read_due;    // the next read at the latest (the board may bring it forward)
    ngx_uint_t slot;        // on the live board
    ngx_atomic_uint_t seen; // the slot's generation when the last read left
    ngx_msec_t progress;    // when the store's log last grew, or could last be read
    ngx_msec_t grew;        // when the store's log last grew
    unsigned busy;          // followers being told, or an append failing at once: not freed meanwhile
};

namespace {

// Following the store's log: the next read comes soon after bytes came,
// then later and later while none do; before the head, as often as a wait
// group looks (wait.cpp).
constexpr ngx_msec_t read_first = 2;
constexpr ngx_msec_t read_streaming_max = 8;
constexpr ngx_msec_t read_waiting_first = 25;
constexpr ngx_msec_t read_waiting_max = 500;
// While the log streams, the live board is looked at this often: a log
// published in another worker of this nginx is read as soon as it grew.
constexpr ngx_msec_t board_tick = 1;
// A log that ended stays in the store this long for followers still reading it.
constexpr std::uint64_t ended_log_ttl_ms = 10000;
// A log that did not grow for this long is read in a way that tells whether
// it is gone (its gateway died before its end).
constexpr ngx_msec_t gone_check_after = 1000;

ngx_rbtree_t feeds;
ngx_rbtree_node_t feeds_sentinel;
bool feeds_ready = false;
LogLimiter append_log, read_fail_log;

Feed* feed_of(ngx_str_node_t* node)
{
    return reinterpret_cast<Feed*>(reinterpret_cast<char*>(node) - offsetof(Feed, node));
}

std::string_view key_of(const Feed* f)
{
    return {reinterpret_cast<const char*>(f->node.str.data), f->node.str.len};
}

// The feed moves on to `next` (see FeedState).
void enter(Feed* f, FeedState next)
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed state %s -> %s (\"%V\")",
                   state_name(f->state), state_name(next), &f->node.str);
    f->state = next;
}

// Its copy in the store moves on to `next` (see StoreCopy).
void enter(Feed* f, StoreCopy next)
{
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed store copy %s -> %s (\"%V\")",
                   state_name(f->copy), state_name(next), &f->node.str);
    f->copy = next;
}

bool ended(const Feed* f)
{
    return f->state == FeedState::ended || f->state == FeedState::ended_early;
}

// The log ends (how): after followers could join, or before.
void end_log(Feed* f, LiveEnd how)
{
    f->how = how;
    bool joinable = f->state == FeedState::streaming || f->state == FeedState::publishing;
    enter(f, joinable ? FeedState::ended : FeedState::ended_early);
}

// The live key: the store key, then the hex of the claim's token.
std::size_t live_key(const RequestCtx* ctx, std::string_view token, u_char* out)
{
    u_char* p = ngx_cpymem(out, ctx->claim.key.data, ctx->claim.key.len);
    p = ngx_hex_dump(p, reinterpret_cast<u_char*>(const_cast<char*>(token.data())), token.size());
    return static_cast<std::size_t>(p - out);
}

Feed* find(std::string_view key)
{
    if (!feeds_ready) {
        ngx_rbtree_init(&feeds, &feeds_sentinel, ngx_str_rbtree_insert_value);
        feeds_ready = true;
    }
    ngx_str_t str{key.size(), reinterpret_cast<u_char*>(const_cast<char*>(key.data()))};
    ngx_str_node_t* node = ngx_str_rbtree_lookup(&feeds, &str, ngx_crc32_long(str.data, str.len));
    return node != nullptr ? feed_of(node) : nullptr;
}

void on_live(ngx_event_t* ev);
bool add_frame(Feed* f, std::size_t size);
bool add_body(Feed* f, std::string_view bytes);
void on_tell(ngx_event_t* ev);
void on_next_read(ngx_event_t* ev);

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

// A log holds the body up to idempotency_max_response_size, or to the
// first piece of a response kept in pieces (the capture cuts it there),
// its head, and the frames' overhead; the store's log of a publisher that
// wrote many small frames may be longer than the body by their overhead.
std::size_t log_limit(const LocConf* conf)
{
    return 6 * capture_limit(conf->max_response_size, conf->piece_size) + 2 * max_record_header_bytes + 64 * 1024;
}

bool reserve(Feed* f, std::size_t more)
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

void free_if_idle(Feed* f)
{
    if (idle(f)) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: live feed \"%V\" is done", &f->node.str);
        free_feed(f);
    }
}

// Tells the followers what came: watchers join once there is a head,
// joiners send. A follower may finish (and leave) while it is told, and
// so may others (the streams of one HTTP/2 connection): each is taken
// from a list of those not told yet and put back before it is told.
void tell_now(Feed* f, bool head_came)
{
    f->busy++;
    if (head_came) {
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

// The followers are told on the next turn of the event loop, never from
// inside another request's filters or a store's reply: what came meanwhile
// is told at once.
void tell(Feed* f, bool head_came)
{
    f->head_to_tell = f->head_to_tell || head_came;
    if (!f->telling.posted) {
        ngx_post_event(&f->telling, &ngx_posted_events);
    }
}

void on_tell(ngx_event_t* ev)
{
    auto* f = static_cast<Feed*>(ev->data);
    bool head_came = std::exchange(f->head_to_tell, false);
    tell_now(f, head_came);
}

// Reads what was added to the log: the head, the end; a log that is not
// well formed, or whose head is another request's, is cut where it went bad.
// Returns whether the head came now.
bool take_in(Feed* f)
{
    bool head_came = false;
    while (!ended(f)) {
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

// ------------------------------------------------------------ publishing

void flush(Feed* f);

void on_appended(void* data, LiveStatus status, std::string_view)
{
    auto* f = static_cast<Feed*>(data);
    f->call.answered();
    if (status == LiveStatus::done) {
        f->published += f->sending;
        f->sending = 0;
        live_board_bump(f->slot);  // followers in the other workers read it now
        if (ended(f) && f->published == f->len) {
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

// Appends what the store does not have yet, one append in flight at a time.
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
        // The store cannot be reached now: the log is given up at once. The
        // caller goes on with f (it tells the followers, then frees f if
        // idle): f must outlive this, even with no follower left.
        f->busy++;
        on_appended(f, LiveStatus::failed, {});
        f->busy--;
    }
}

// The response outlived the turn it began in: it is live. Its watchers
// join it, and from now on its log goes to the store as it grows. (One
// that ends in that turn is answered from the store, as a whole: the
// watchers' wait goes on to its end, and the store never sees a log.)
void on_live(ngx_event_t* ev)
{
    auto* f = static_cast<Feed*>(ev->data);
    if (f->state == FeedState::starting) {
        enter(f, FeedState::publishing);
    }
    if (f->conf->seal_keys == nullptr) {  // with encryption at rest nothing goes to the store
        enter(f, StoreCopy::appending);
    }
    // Until now the body went to the capture alone (most responses end in
    // the turn they began in): the feed takes what it has over, at once.
    std::string_view body = f->publisher != nullptr ? captured_body(f->publisher) : std::string_view{};
    if (!body.empty()) {
        add_body(f, body);
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: the response published as \"%V\" is live",
                   &f->node.str);
    flush(f);
    tell(f, true);
}

bool add_frame(Feed* f, std::size_t size)
{
    if (!reserve(f, size)) {
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

// --------------------------------------------------- following the store

void read_log(Feed* f);

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
        if (f->len + bytes.size() > log_limit(f->conf) || !reserve(f, bytes.size())) {
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
    if (!ended(f)) {
        read_later(f, grew);
    }
    if (grew || ended(f)) {
        tell(f, head_came);
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

// The next read is due, or the board says the log grew (or another log of
// the slot did: a needless read); else the board is looked at again.
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

// A feed that followed the store becomes this worker's own: its original
// came here after all (the claim granted to a request of this worker).
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

}  // namespace

// ------------------------------------------------------------ publishing

Feed* feed_open(RequestCtx* ctx) noexcept
{
    if (ctx->conf->wait == 0) {
        return nullptr;
    }
    std::optional<Record> claim = decode_record(view(ctx->claim.record));
    auto* key = static_cast<u_char*>(ngx_pnalloc(ctx->request->pool, ctx->claim.key.len + 2 * claim->token.size()));
    if (key == nullptr) {
        return nullptr;
    }
    std::string_view live{reinterpret_cast<char*>(key), live_key(ctx, claim->token, key)};
    Feed* f = find(live);
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
    if (head == 0 || !reserve(f, live_start_size + head)) {
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
    tell(f, false);
}

void feed_end(Feed* f, LiveEnd how) noexcept
{
    f->publisher = nullptr;
    if (f->state != FeedState::starting && f->state != FeedState::publishing) {
        if (f->state == FeedState::ended) {  // cut off already (out of memory)
            tell(f, false);
            return;
        }
        if (f->state == FeedState::opened) {  // never published
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
    tell(f, false);
}

void feed_renew(Feed* f) noexcept
{
    if (f->copy == StoreCopy::appending && f->state == FeedState::publishing) {
        f->store->live_expire(key_of(f), f->conf->lock_ttl);
    }
}

// ------------------------------------------------------------- following

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
    return ended(f);
}

Record feed_head(const Feed* f) noexcept
{
    return *decode_record({f->log + f->head_at + live_frame_overhead, f->head_len - live_frame_overhead});
}

bool feed_follow(RequestCtx* ctx, std::string_view claim, FeedTell tell) noexcept
{
    std::optional<Record> original = decode_record(claim);
    if (!original || original->kind != RecordKind::claim) {
        return false;
    }
    auto* key = static_cast<u_char*>(ngx_pnalloc(ctx->request->pool, ctx->claim.key.len + 2 * original->token.size()));
    if (key == nullptr) {
        return false;
    }
    std::string_view live{reinterpret_cast<char*>(key), live_key(ctx, original->token, key)};
    Feed* f = find(live);
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
    bool reads = f->state == FeedState::following || f->state == FeedState::streaming;
    if (reads && !f->call.pending() && !f->next_read.timer_set) {
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

void feeds_exit() noexcept
{
    while (feeds_ready && feeds.root != feeds.sentinel) {
        free_feed(feed_of(reinterpret_cast<ngx_str_node_t*>(ngx_rbtree_min(feeds.root, feeds.sentinel))));
    }
}

}  // namespace idem
