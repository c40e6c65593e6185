// feed_parts.hpp — the feed's insides, shared by its files and by no other:
// the feed itself and its life (FeedState, StoreCopy), the registry and the
// telling (feed.cpp), publishing an original of this worker
// (feed_publish.cpp), and following the store's log (feed_follow.cpp).
// Everything else sees a feed through feed.hpp alone.
#pragma once

#include "conf.hpp"
#include "feed.hpp"
#include "store.hpp"
#include "store_call.hpp"

namespace idem {

// Where a feed is in its life. Each transition is one call to enter(),
// which logs the old and the new state at debug level, as the request's
// does (request_ctx.hpp), so that a debug log shows each feed's path
// (docs/design.md#the-feeds-life):
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
// A feed is freed once nothing is left to do with it, whatever its state.
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

// ------------------------------------------------------ feed.cpp: the life

// See FeedState and StoreCopy.
void enter(Feed* f, FeedState next);
void enter(Feed* f, StoreCopy next);
bool has_ended(const Feed* f);
// The log ends (how): ended after followers could join, else ended_early.
void end_log(Feed* f, LiveEnd how);

// ------------------------------------------------- feed.cpp: the registry

std::string_view key_of(const Feed* f);
// The live key of ctx's key and the claim token `token`, in r->pool (empty:
// out of memory).
std::string_view live_key(RequestCtx* ctx, std::string_view token);
Feed* find_feed(std::string_view key);
// A feed under `key`, with ctx's store, configuration and fingerprint
// (nullptr: out of memory).
Feed* new_feed(RequestCtx* ctx, std::string_view key, FeedState first);
// Frees f once no one holds, follows or uses it and its store copy is done.
void free_if_idle(Feed* f);

// --------------------------------------------------- feed.cpp: the log

bool reserve_log(Feed* f, std::size_t more);
// Reads what was added to the log: the head, the end; a log that is not
// well formed, or whose head is another request's, is cut where it went
// bad. Returns whether the head came now.
bool take_in(Feed* f);
// The followers are told what came (head_came: the watchers, that the head
// came) on the next turn of the event loop.
void tell_followers(Feed* f, bool head_came);

// ----------------------------------------- feed_publish.cpp, feed_follow.cpp

// The handlers new_feed gives its events: went_live's (the response
// outlived the turn it began in), next_read's (a read of the store's log
// may be due).
void on_live(ngx_event_t* ev);
void on_next_read(ngx_event_t* ev);
// A feed that followed the store becomes this worker's own (-> opened).
void make_local(Feed* f);

}  // namespace idem
