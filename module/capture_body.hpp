// capture_body.hpp — what capture.cpp and capture_body.cpp share, private
// to them: the record buffer the body goes into, and the pace at which the
// body passes while it is kept in pieces.
#pragma once

#include <cstddef>

#include "live_log.hpp"
#include "request_ctx.hpp"

namespace idem {

// The capture's flag in the connection's `buffered` while it holds the
// body back: nginx then waits for the output (ngx_http_writer) rather than
// ending the request. No filter of nginx's own uses it.
constexpr unsigned capture_buffered = 0x80;

// The record buffer's first room for a body of no stated length.
constexpr size_t initial_body_capacity = 16 * 1024;

// capture_body.cpp

// The most body bytes the record buffer holds: the whole body, or, for a
// response that may be kept in pieces, one piece's.
size_t buffer_limit(const RequestCtx* ctx) noexcept;
// Room for a record's tail (its trailers) after the body; nullptr when the
// response can no longer be kept.
char* reserve_tail(ngx_http_request_t* r, RequestCtx* ctx, size_t tail) noexcept;
// A response kept in pieces has come to its end: true once its last piece
// went and every piece is answered (or the response was lost on the way),
// so that its record may go; false while the store is at one.
bool pieces_landed(RequestCtx* ctx) noexcept;
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

// capture.cpp

// The live response ends (how): its followers are told.
void end_feed(RequestCtx* ctx, LiveEnd how);
// The response can no longer be kept: it ends as unreplayable (`why`).
void lose(RequestCtx* ctx, const char* why);
// The last byte has passed: store the record (or the marker of a response
// that cannot be kept); false while a response in pieces waits for them
// to land (pieces_landed), to be called again when the store answered.
bool finish(ngx_http_request_t* r, RequestCtx* ctx);
// The filter below the capture's point.
ngx_http_output_body_filter_pt next_body_filter_at(CapturePoint point) noexcept;

}  // namespace idem
