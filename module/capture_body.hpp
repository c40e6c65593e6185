// capture_body.hpp — what capture.cpp, capture_body.cpp and
// capture_buffer.cpp share, private to them: the body's way through the
// capture's filter, and the pace at which it passes while it is kept in
// pieces (the record buffer it goes into: capture_buffer.hpp).
#pragma once


#include "live_log.hpp"
#include "request_ctx.hpp"

namespace idem {

// The capture's flag in the connection's `buffered` while it holds the
// body back: nginx then waits for the output (ngx_http_writer) rather than
// ending the request. No filter of nginx's own uses it.
constexpr unsigned capture_buffered = 0x80;

// capture_body.cpp

// Records `in` and passes it to `next` — or swallows it once the client is
// gone —, behind what is held back; what cannot be recorded until the store
// answers a piece is held back. At whichever point the body is recorded
// (Capture::point).
ngx_int_t record_body(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* in, ngx_http_output_body_filter_pt next);
// Whether the body passes through the capture's filter: it is followed, or
// some of it is held back still.
bool passes_capture(const RequestCtx* ctx) noexcept;
// The capture stops (the response ended unfinished): it waits for the
// store no more, and what it holds goes on at the next call of its filter.
void release_hold(RequestCtx* ctx) noexcept;
// The response spills into pieces (capture_buffer.cpp): they begin, each
// answer of the store resuming a capture that waits for it; nullptr when
// they cannot.
PieceWriter* begin_pieces(RequestCtx* ctx);

// capture.cpp

// The live response ends (how): its followers are told.
void end_feed(RequestCtx* ctx, LiveEnd how);
// The last byte has passed: store the record (or the marker of a response
// that cannot be kept); false while a response in pieces waits for them
// to land (pieces_landed), to be called again when the store answered.
bool finish(ngx_http_request_t* r, RequestCtx* ctx);
// The filter below the capture's point.
ngx_http_output_body_filter_pt next_body_filter_at(CapturePoint point) noexcept;

}  // namespace idem
