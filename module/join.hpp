// join.hpp — a duplicate joins its original's response live: the head and
// bytes so far at once, then each byte as the feed gets it, ending as the
// original's did; Last-Event-ID skips what it saw (sse.hpp). One chunk in
// flight per joiner: a slow client slows itself alone. Owns Join; must not
// touch the feed's log nor the claim. See docs/design.md#live-join.
#pragma once

#include <cstddef>
#include <string_view>

#include "feed.hpp"
#include "live_log.hpp"
#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// Written by join.cpp alone; the feed it follows is its Follower (feed.hpp).
struct Join {
    std::size_t pos;       // in the feed's log: the next frame to read
    std::size_t in_frame;  // of that frame's body: what was sent already
    LiveReadState read;
    std::size_t skip;      // body bytes not to send (Last-Event-ID)
    ngx_chain_t* free;     // the joiner's chunk buffers
    ngx_chain_t* busy;
};

// Joins once the head comes, then sends what the log brings. The access
// handler hands it to the claim (RequestHooks), a floor below the answers.
extern const FeedTell join_tell;

// Returns what the pre-content phase returns.
ngx_int_t join_send(ngx_http_request_t* r, RequestCtx* ctx) noexcept;

}  // namespace idem
