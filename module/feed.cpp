// feed.cpp — see feed.hpp.

#include "feed.hpp"

#include <cstring>
#include <new>
#include <utility>

#include "join.hpp"
#include "live_board.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "pieces.hpp"
#include "request_ctx.hpp"
#include "send.hpp"
#include "store_call.hpp"
#include "timing.hpp"

namespace idem {

struct Feed {
    ngx_str_node_t node;    // str: the live key, copied after the feed
    LiveStore* store;
    LocConf* conf;          // the publisher's, or the first follower's
    Digest fingerprint;
    ngx_queue_t watchers;   // by Join::link: waiting for the head
    ngx_queue_t joiners;    // by Join::link: sent each byte as it comes
    char* log;              // ngx_alloc'd: the live log as far as it is known
    std::size_t len;
    std::size_t capacity;
    std::size_t good;       // read and found well formed: what followers are given
    LiveReadState read;
    std::size_t head_at;    // the head record's place in the log
    std::size_t head_len;
    bool has_head;
    bool live;              // followers may join: it outlived the turn its response began in
    bool ended;
    LiveEnd how;
    RequestCtx* publisher;  // the original, while it holds the feed
    bool local;             // its original is a request of this worker
    bool held;              // ... which has not ended it yet
    bool publishing;        // its head is written, its end not yet
    bool to_store;          // its log goes to the store (not with encryption at rest)
    bool store_started;     // the first append has left
    bool broken;            // an append failed: the store's log is given up
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
void on_tell(ngx_event_t* ev);
void on_next_read(ngx_event_t* ev);

Feed* new_feed(RequestCtx* ctx, std::string_view key)
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
    if (f->busy != 0 || f->held || !ngx_queue_empty(&f->watchers) || !ngx_queue_empty(&f->joiners)) {
        return false;
    }
    // a publisher's log goes on to the store to its end, unless given up
    return !(f->local && f->to_store && f->store_started && !f->broken && f->published < f->len);
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
            auto* ctx = ngx_queue_data(ngx_queue_head(&f->watchers), RequestCtx, join.link);
            ngx_queue_remove(&ctx->join.link);
            ngx_queue_insert_tail(&f->joiners, &ctx->join.link);
            ctx->join.joined = true;
            join_ready(ctx);  // it joins, or leaves
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
        join_more(ngx_queue_data(q, RequestCtx, join.link));
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
    while (!f->ended) {
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
            f->ended = true;
            f->how = LiveEnd::aborted;
            break;
        }
        if (item.kind == LiveItem::Kind::head) {
            f->head_at = at == 0 ? live_start_size : at;  // the frame's, past the log's start
            f->head_len = f->good - f->head_at;
            f->has_head = true;
            f->live = !f->local;  // a log in the store is live; a local one goes live after its first turn
            head_came = true;
        } else if (item.kind == LiveItem::Kind::end) {
            f->ended = true;
            f->how = item.how;
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
        if (f->ended && f->published == f->len) {
            f->store->live_expire(key_of(f), ngx_max(ended_log_ttl_ms, std::uint64_t{f->conf->lock_ttl}));
        }
        flush(f);
        free_if_idle(f);
        return;
    }
    f->broken = true;
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
    if (!f->to_store || !f->store_started || f->broken || f->call.pending() || f->published == f->len) {
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
    // Until now the body went to the capture alone (most responses end in
    // the turn they began in): the feed takes what it has over, at once.
    std::string_view body = f->publisher != nullptr && f->publishing ? captured_body(f->publisher) : std::string_view{};
    if (!body.empty() && add_frame(f, live_frame_overhead + body.size())) {
        char* to = encode_live_body_header(f->log + f->len, body.size());
        std::memcpy(to, body.data(), body.size());
        f->len = static_cast<std::size_t>(to - f->log) + body.size();
        take_in(f);
    }
    f->live = true;
    f->store_started = f->to_store;
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0, "idempotency: the response published as \"%V\" is live",
                   &f->node.str);
    flush(f);
    tell(f, true);
}

bool add_frame(Feed* f, std::size_t size)
{
    if (!reserve(f, size)) {
        f->publishing = false;  // out of memory: its followers are cut off
        f->ended = true;
        f->how = LiveEnd::aborted;
        return false;
    }
    return true;
}

// --------------------------------------------------- following the store

void read_log(Feed* f);

void read_later(Feed* f, bool grew)
{
    ngx_msec_t first = f->has_head ? read_first : read_waiting_first;
    ngx_msec_t most = f->has_head ? read_streaming_max : read_waiting_max;
    f->read_delay = grew ? first : ngx_min(ngx_max(f->read_delay * 2, first), most);
    f->read_due = ngx_current_msec + f->read_delay;
    ngx_add_timer(&f->next_read, f->has_head ? ngx_min(board_tick, f->read_delay) : f->read_delay);
}

void cut_off(Feed* f, const char* why)
{
    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0, "idempotency: the live log \"%V\" %s: its followers are cut off",
                  &f->node.str, why);
    f->ended = true;
    f->how = LiveEnd::aborted;
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
    if (!f->ended) {
        read_later(f, grew);
    }
    if (grew || f->ended) {
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
    if (f->has_head && live_board_read(f->slot) == f->seen
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
    f->has_head = false;
    f->live = false;
    f->ended = false;
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
    } else if ((f = new_feed(ctx, live)) == nullptr) {
        return nullptr;
    }
    f->conf = ctx->conf;
    f->publisher = ctx;
    f->local = true;
    f->held = true;
    f->to_store = ctx->conf->seal_keys == nullptr;
    return f;
}

void feed_publish(Feed* f, RequestCtx* ctx, std::uint16_t status, const Header* headers, std::size_t count,
                  const ResponseExtras& extras) noexcept
{
    if (!f->held || f->publishing || f->ended || (extras.flags & expect_trailers) != 0) {
        return;  // a response with trailers is not joined: its duplicates get it whole from the store
    }
    std::size_t head = live_head_size(headers, count, extras);
    if (head == 0 || !add_frame(f, live_start_size + head)) {
        f->ended = false;  // nothing was published: the waiters go on waiting for the store
        return;
    }
    f->publishing = true;
    f->len += encode_live_start(f->log);
    f->len += encode_live_head(f->log + f->len, ctx->fingerprint, status, headers, count, extras);
    take_in(f);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "idempotency: publishing the response to \"%V\" under \"%V\"", &ctx->claim.key, &f->node.str);
    ngx_post_event(&f->went_live, &ngx_posted_events);
}

void feed_body(Feed* f, std::string_view bytes) noexcept
{
    if (!f->publishing || !f->live || bytes.empty()) {
        return;  // before it is live, the body is kept by the capture alone (on_live)
    }
    if (!add_frame(f, live_frame_overhead + bytes.size())) {
        tell(f, false);
        return;
    }
    char* to = encode_live_body_header(f->log + f->len, bytes.size());
    std::memcpy(to, bytes.data(), bytes.size());
    f->len = static_cast<std::size_t>(to - f->log) + bytes.size();
    take_in(f);
    flush(f);
    tell(f, false);
}

void feed_end(Feed* f, LiveEnd how) noexcept
{
    f->held = false;
    f->publisher = nullptr;
    if (!f->publishing) {  // never published, or cut off already (out of memory)
        if (f->ended && f->has_head) {
            tell(f, false);
        } else {
            free_if_idle(f);
        }
        return;
    }
    f->publishing = false;
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
    if (f->to_store && f->store_started && !f->broken && f->publishing) {
        f->store->live_expire(key_of(f), f->conf->lock_ttl);
    }
}

// ------------------------------------------------------------- following

bool feed_has_head(const Feed* f) noexcept
{
    return f->has_head && f->live;
}

std::string_view feed_log(const Feed* f) noexcept
{
    return {f->log, f->good};
}

bool feed_ended(const Feed* f, LiveEnd& how) noexcept
{
    how = f->how;
    return f->ended;
}

Record feed_head(const Feed* f) noexcept
{
    return *decode_record({f->log + f->head_at + live_frame_overhead, f->head_len - live_frame_overhead});
}

bool feed_follow(RequestCtx* ctx, std::string_view claim) noexcept
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
    if (ctx->join.feed != nullptr && ctx->join.feed != f) {
        feed_leave(ctx);  // the original it followed was released; another took its place
    }
    if (ctx->join.feed == f && f != nullptr) {
        return feed_has_head(f);
    }
    if (f == nullptr) {
        if (ctx->conf->seal_keys != nullptr || ctx->claim.store == nullptr) {
            return false;  // with encryption at rest nothing is published to follow
        }
        f = new_feed(ctx, live);
        if (f == nullptr) {
            return false;
        }
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                       "idempotency: following the live log \"%V\" in the store", &f->node.str);
    }
    ctx->join.feed = f;
    ctx->join.joined = false;
    ngx_queue_insert_tail(&f->watchers, &ctx->join.link);
    if (!f->local && !f->call.pending() && !f->next_read.timer_set && !f->ended) {
        read_log(f);  // its answer comes later, at the earliest on the next turn
    }
    return feed_has_head(f);
}

void feed_attach(RequestCtx* ctx) noexcept
{
    if (!ctx->join.joined) {
        ngx_queue_remove(&ctx->join.link);
        ngx_queue_insert_tail(&ctx->join.feed->joiners, &ctx->join.link);
        ctx->join.joined = true;
    }
}

void feed_leave(RequestCtx* ctx) noexcept
{
    Feed* f = ctx->join.feed;
    if (f == nullptr) {
        return;
    }
    ngx_queue_remove(&ctx->join.link);
    ctx->join.feed = nullptr;
    ctx->join.joined = false;
    free_if_idle(f);
}

void feeds_exit() noexcept
{
    while (feeds_ready && feeds.root != feeds.sentinel) {
        free_feed(feed_of(reinterpret_cast<ngx_str_node_t*>(ngx_rbtree_min(feeds.root, feeds.sentinel))));
    }
}

}  // namespace idem
