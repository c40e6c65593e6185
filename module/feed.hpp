// feed.hpp — live joining: the responses being followed in this worker, one
// feed per original per worker, found by live key (store key + claim token,
// so another claim never shares one). A local original publishes its feed
// and, once live, appends it to the store; elsewhere a feed follows the
// store's log. Bounded by idempotency_max_response_size of body. Followers
// are told through the FeedTell they gave, so the feed's files call nothing
// of join.cpp. Must not touch the requests' responses nor their claims.
// See docs/design.md#live-join and docs/design.md#the-feeds-life.
#pragma once

#include <string_view>

#include "live_log.hpp"
#include "ngx.hpp"
#include "record.hpp"

namespace idem {

struct Feed;
struct RequestCtx;

struct FeedTell {
    void (*ready)(RequestCtx* ctx);  // the head came: a watcher joins (or leaves)
    void (*more)(RequestCtx* ctx);   // more of the log, or its end: a joiner sends what it can
};

// Written by the feed's files alone.
struct Follower {
    Feed* feed;            // followed: watched, or joined; nullptr when none
    ngx_queue_t link;      // in the feed's watchers or joiners
    bool joined;           // in the joiners (else a watcher)
    FeedTell tell;
};


// nullptr: idempotency_wait is off, or out of memory. The original holds it
// until feed_end.
Feed* feed_open(RequestCtx* ctx) noexcept;
// Not for a response that ends with trailers: its duplicates get it from the store.
void feed_publish(Feed* feed, RequestCtx* ctx, std::uint16_t status, const Header* headers, std::size_t count,
                  const ResponseExtras& extras) noexcept;
void feed_body(Feed* feed, std::string_view bytes) noexcept;
// Also when never published: the original lets go.
void feed_end(Feed* feed, LiveEnd how) noexcept;
void feed_renew(Feed* feed) noexcept;


bool feed_has_head(const Feed* feed) noexcept;
std::string_view feed_log(const Feed* feed) noexcept;
// `how`: the log's end, or the feed's own when the log could not be followed.
bool feed_ended(const Feed* feed, LiveEnd& how) noexcept;
// Its views last until the log grows.
Record feed_head(const Feed* feed) noexcept;

// Makes a feed following the store when this worker has none. True when the
// head is there already (ctx may join now); false when ctx only watches (or
// nothing can be joined: ctx->follower.feed stays nullptr).
bool feed_follow(RequestCtx* ctx, std::string_view claim, FeedTell tell) noexcept;
void feed_attach(RequestCtx* ctx) noexcept;
void feed_leave(RequestCtx* ctx) noexcept;

// Worker exit; the stores go after it.
void feeds_exit() noexcept;

}  // namespace idem
