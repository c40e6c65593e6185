// capture_body.hpp — shared by capture*.cpp alone: the body's way through the
// capture's filter and its pace while kept in pieces.
#pragma once


#include "live_log.hpp"
#include "request_ctx.hpp"

namespace idem {

// In the connection's `buffered` while the body is held back, so nginx waits
// for the output (ngx_http_writer) rather than ending the request. No nginx
// filter uses this bit.
constexpr unsigned capture_buffered = 0x80;


// Swallowed instead once the client is gone; what must wait for the store
// to answer a piece is held back.
ngx_int_t record_body(ngx_http_request_t* r, RequestCtx* ctx, ngx_chain_t* in, ngx_http_output_body_filter_pt next);
// Followed, or some of it still held back.
bool passes_capture(const RequestCtx* ctx) noexcept;
// What it holds goes on at the next call of its filter.
void release_hold(RequestCtx* ctx) noexcept;
// Each store answer resumes a capture that waits; nullptr when they cannot.
PieceWriter* begin_pieces(RequestCtx* ctx);


void end_feed(RequestCtx* ctx, LiveEnd how);
// False while a response in pieces waits for them to land; called again when
// the store answered.
bool finish(ngx_http_request_t* r, RequestCtx* ctx);
ngx_http_output_body_filter_pt next_body_filter_at(CapturePoint point) noexcept;

}  // namespace idem
