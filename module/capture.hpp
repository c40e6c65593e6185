// capture.hpp — the filters that record a claimed request's response, and the
// capture's part of the request context, private to capture*.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "ngx.hpp"

namespace idem {

struct RequestCtx;
struct Feed;
struct PieceWriter;

// Upper when no filter in between changes the body, else lower.
enum class CapturePoint : std::uint8_t { undecided, upper, lower };

enum class Pace : std::uint8_t {
    flowing,  // the body passes as it comes
    holding,  // a piece is at the store and the next one is full, or the last pieces are not answered yet: what
              // comes is held, the request blocked, until the store answers
};

// Built in place: the head is written at the end, the body after it as it passes.
struct Capture {
    ngx_uint_t upper_headers;       // response headers in the list at the upper filter point
    std::uint8_t upper_body_flags;  // what the filters had asked of the body there
    CapturePoint point;
    bool oversize;                  // cannot be kept (lost_why): stored as unreplayable
    const char* lost_why;           // why, when not too large
    ngx_array_t headers;            // of Header, as the client got them (capture_headers.cpp)
    char* record;                   // ngx_alloc'd: the store may take it over
    size_t head_size;               // room kept for the head, before the body
    size_t body_size;
    size_t capacity;                // for the body
    PieceWriter* pieces;            // a response larger than idempotency_piece_size: its pieces (piece_writer.hpp)
    size_t flushed;                 // body bytes handed to the pieces; the record buffer holds the rest
    Pace pace;
    ngx_chain_t* held;              // the body held back, oldest first: links of r->pool to the senders' buffers
    off_t held_taken;               // bytes of the first held buffer recorded already
    ngx_event_t resume;             // posted when the store answered a piece the capture waits for
    Feed* feed;                     // the response published live (feed.hpp), until it ends
    std::uint64_t ttl_ms;           // how long the upstream asked it be kept (ttl=); 0: idempotency_ttl
    void (*upstream_finalize)(ngx_http_request_t* r, ngx_int_t rc);  // the upstream module's, behind ours
};

// Lower point, right below postpone.
ngx_int_t capture_init(ngx_conf_t* cf);
// Upper point, right below not_modified.
ngx_int_t capture_upper_init(ngx_conf_t* cf);
void capture_begin(RequestCtx* ctx) noexcept;
// Empty once it could not be kept; taken over by a feed going live.
std::string_view captured_body(const RequestCtx* ctx) noexcept;
// Settles a claim whose response never completed.
void capture_settle(RequestCtx* ctx) noexcept;

}  // namespace idem
