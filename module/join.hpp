// join.hpp — a duplicate that joins its original's response live
// (docs/design.md#live-join): it gets the status and headers at once, the
// bytes sent so far, then each further byte as the feed (feed.hpp) gets
// it, and its response ends the way the original's did: whole, or cut off
// (the connection closed before the end) when the original's was. A retry
// of an event stream with Last-Event-ID gets only what follows that event
// (sse.hpp). One joiner holds at most one chunk of its own in flight: a
// slow client slows itself alone.
// Owns the joining part of the request context (Join); must not touch the
// feed's log (feed*.cpp) nor the claim.
#pragma once

#include <cstddef>
#include <string_view>

#include "feed.hpp"
#include "live_log.hpp"
#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// The joining part of the request context, written by join.cpp alone (the
// feed it follows is the request's Follower, feed.hpp).
struct Join {
    std::size_t pos;       // in the feed's log: the next frame to read
    std::size_t in_frame;  // of that frame's body: what was sent already
    LiveReadState read;
    std::size_t skip;      // body bytes not to send (Last-Event-ID)
    ngx_chain_t* free;     // the joiner's chunk buffers
    ngx_chain_t* busy;
};

// How a duplicate that follows its original's feed (feed_follow) is told:
// it joins once the head comes, then sends what the log brings. The access
// handler hands it to the claim (RequestHooks), a floor below the answers.
extern const FeedTell join_tell;

// The request's answer is to join (Outcome::joined): sends the head and
// what there is, then goes on as the feed grows. Returns what the
// pre-content phase returns.
ngx_int_t join_send(ngx_http_request_t* r, RequestCtx* ctx) noexcept;

}  // namespace idem
