// capture_headers.hpp — what the capture records besides the body: the
// response's headers as the client gets them, its trailers, and how nginx
// treats it (capture_headers.cpp), and whether it can be sent again at all;
// and the upstream's control header, taken out of every response before
// anything records or sends it.
#pragma once

#include <cstdint>

#include "request_ctx.hpp"
#include "upstream_control.hpp"

namespace idem {

// Fills ctx->capture.headers: Content-Type as sent (with nginx's charset), a file's
// Last-Modified, and the list entries the response had at the upper filter
// point (plus a Content-Encoding a filter added), without those that
// describe the connection or the moment. False when out of memory.
bool collect_headers(ngx_http_request_t* r, RequestCtx* ctx);

// The trailers in r->headers_out.trailers, as Header views. False when out
// of memory.
bool collect_trailers(ngx_http_request_t* r, ngx_array_t& out);

// Takes the upstream's control header (idempotency_upstream_control NAME,
// in force in r's location) out of the response: every entry of that name,
// whatever its case, leaves the list (its hash zeroed, as nginx deletes a
// header), so that no filter below sends it and no capture records it, in
// every response of the location, also those the module does not capture.
// For a `captured` one, what their values (read as one list,
// upstream_control.hpp) asked, into `control`; nullptr when there was none
// or the response is not captured. One warning per response for what was
// ignored, without the key.
const UpstreamControl* take_upstream_control(ngx_http_request_t* r, bool captured, UpstreamControl& control);

// The entries of a list of headers, deleted ones too: where a filter's
// additions begin.
ngx_uint_t count_headers(ngx_list_t& list) noexcept;

// How nginx treats the response (record.hpp's flags), for the replay to be
// treated alike.
std::uint8_t response_flags(const ngx_http_request_t* r) noexcept;

// Whether trailers follow the response's body: nginx expects them, or the
// response is gRPC's (Content-Type application/grpc), whose status comes in
// trailers grpc_pass sets only once the body has passed. Such a response is
// not joined live: its duplicates get it, trailers and all, from the store.
bool trailers_follow(const ngx_http_request_t* r) noexcept;

// Why the response as it is recorded could never be sent again — its
// status as the client gets it and the headers collect_headers took, or the
// trailers collect_trailers took — by the rule the decoder applies to every
// stored response (replayable.hpp): MarkerWhy::unsaid when it can be. Such
// a response still reaches its client as it is; it is kept as the marker
// that says why.
MarkerWhy head_flaw(const RequestCtx* ctx) noexcept;
MarkerWhy trailers_flaw(const ngx_array_t& trailers) noexcept;

}  // namespace idem
