// feed_parts.hpp — the feed's insides, shared by feed*.cpp and no other file;
// everything else sees a feed through feed.hpp. See docs/design.md#the-feeds-life.
#pragma once

#include "conf.hpp"
#include "feed.hpp"
#include "store.hpp"
#include "store_call.hpp"

namespace idem {

// Each transition is one call to enter(); the states and their moves are
// docs/design.md#the-feeds-life. A feed is freed once nothing is left to do
// with it, whatever its state.
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

// The store's copy of the log has a life of its own: a feed that ended may
// still be appending, a publishing one may have given its copy up.
//   none -> appending -> given_up
enum class StoreCopy : std::uint8_t {
    none,       // nothing appended: not live yet, or never (encryption at rest, a log read from the store)
    appending,  // from going live to the log's end, one append in flight at a time
    given_up,   // an append failed: the store's log is dropped, its followers elsewhere cut off
};

struct Feed {
    ngx_str_node_t node;    // str: the live key, copied after the feed
    FeedState state;        // enter() alone writes it
    StoreCopy copy;         // enter() alone writes it
    LiveStore* store;
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
    // Plain fields, not states: holding, store progress, read pacing, a
    // pending telling and busy all come in any state.
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

// ------------------------------------------------------ feed.cpp: the life

void enter(Feed* f, FeedState next);
void enter(Feed* f, StoreCopy next);
bool has_ended(const Feed* f);
// Ended otherwise than whole (cut at a piece or the limit, or aborted): a
// follower that joined now would be cut at once, so none joins; they wait
// for the original's record instead (the replay, or its 410).
bool cut_short(const Feed* f);
// The log ends (how): ended after followers could join, else ended_early.
void end_log(Feed* f, LiveEnd how);

// ------------------------------------------------- feed.cpp: the registry

std::string_view key_of(const Feed* f);
// In r->pool (empty: out of memory).
std::string_view live_key(RequestCtx* ctx, std::string_view token);
Feed* find_feed(std::string_view key);
// nullptr: out of memory.
Feed* new_feed(RequestCtx* ctx, std::string_view key, FeedState first);
// Once no one holds, follows or uses it and its store copy is done.
void free_if_idle(Feed* f);

// --------------------------------------------------- feed.cpp: the log

bool reserve_log(Feed* f, std::size_t more);
// A log not well formed, or whose head is another request's, is cut where it
// went bad. Returns whether the head came now.
bool take_in(Feed* f);
// On the next turn of the event loop.
void tell_followers(Feed* f, bool head_came);

// ----------------------------------------- feed_publish.cpp, feed_follow.cpp

// went_live: the response outlived the turn it began in; next_read: a read
// of the store's log may be due.
void on_live(ngx_event_t* ev);
void on_next_read(ngx_event_t* ev);
// -> opened.
void make_local(Feed* f);

}  // namespace idem
