// feed.hpp — live joining (docs/design.md#live-join): the responses being
// followed in this worker. A feed is one original's response as it streams,
// kept as its live log (live_log.hpp: the head, the body so far, the end),
// and the requests that follow it: watchers, waiting for its head, and
// joiners, sent each byte as it comes (join.hpp). Feeds are found by their
// live key: the original's store key and its claim's token, so that the
// claim of another request never shares one.
//
// An original in this worker publishes its own feed as its response is
// captured (capture.cpp). Once the response outlives the event-loop turn
// that began it — most do not — it is live: the feed takes over the body
// the capture has so far and gets each piece from then on, and appends the
// log to the store under the live key, one append in flight at a time, for
// duplicates in other workers and gateways.
// There a feed follows the store's log: it reads what was appended since
// its last read, quickly while bytes flow, more slowly while they do not.
//
// Bounded: a feed's log holds at most idempotency_max_response_size of body
// (past it the original's capture ends the log as cut), one feed per
// original per worker whatever the number of its followers.
// A follower is told through the functions it gave when it began to follow
// (join.cpp's): the feed's files call nothing of join.cpp. Their insides
// are in feed_parts.hpp, the feed's life (FeedState) among them.
// Owns the feeds and the following part of the request context (Follower);
// must not touch the requests' responses (join.cpp sends them) nor their
// claims.
#pragma once

#include <string_view>

#include "live_log.hpp"
#include "ngx.hpp"
#include "record.hpp"

namespace idem {

struct Feed;
struct RequestCtx;

// How the feed tells a follower what came (join.cpp gives them).
struct FeedTell {
    void (*ready)(RequestCtx* ctx);  // the head came: a watcher joins (or leaves)
    void (*more)(RequestCtx* ctx);   // more of the log, or its end: a joiner sends what it can
};

// The following part of the request context, written by the feed's files
// alone.
struct Follower {
    Feed* feed;            // followed: watched, or joined; nullptr when none
    ngx_queue_t link;      // in the feed's watchers or joiners
    bool joined;           // in the joiners (else a watcher)
    FeedTell tell;
};

// ---------------------------------------------------------- publishing

// The original holds its claim and is forwarded: its feed, which duplicates
// in this worker watch from now on (nullptr: idempotency_wait is off, or
// out of memory). The original holds it until feed_end.
Feed* feed_open(RequestCtx* ctx) noexcept;
// Its response head reached the capture: the head is published (not for a
// response that ends with trailers: its duplicates get it from the store).
void feed_publish(Feed* feed, RequestCtx* ctx, std::uint16_t status, const Header* headers, std::size_t count,
                  const ResponseExtras& extras) noexcept;
// More of the body, as the client gets it.
void feed_body(Feed* feed, std::string_view bytes) noexcept;
// The response ended (how), or was never published: the original lets go.
void feed_end(Feed* feed, LiveEnd how) noexcept;
// The original's claim was renewed: so is its log in the store.
void feed_renew(Feed* feed) noexcept;

// ----------------------------------------------------------- following

// The original's head is known: a follower can join.
bool feed_has_head(const Feed* feed) noexcept;
// The feed's log, as far as it is known.
std::string_view feed_log(const Feed* feed) noexcept;
// Whether the response ended, and how (the log's end, or the feed's
// own when the log could not be followed to it).
bool feed_ended(const Feed* feed, LiveEnd& how) noexcept;
// The head, decoded from the log as it is now (feed_has_head): its views
// last until the log grows.
Record feed_head(const Feed* feed) noexcept;

// ctx found its original in flight, holding the claim record `claim`: it
// follows the original's feed, made here to follow the store when this
// worker has none yet. True when the feed has its head already (ctx may
// join now); false when ctx only watches for it (or nothing can be joined:
// ctx->follower.feed stays nullptr). Once the head comes, each watcher is
// told through `tell.ready`.
bool feed_follow(RequestCtx* ctx, std::string_view claim, FeedTell tell) noexcept;
// ctx, a watcher, becomes a joiner: it is told of every new byte (tell.more).
void feed_attach(RequestCtx* ctx) noexcept;
// ctx stops following (answered otherwise, finished, or gone).
void feed_leave(RequestCtx* ctx) noexcept;

// Worker exit: what is left goes (the stores go after it).
void feeds_exit() noexcept;

}  // namespace idem
