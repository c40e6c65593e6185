// capture_headers.hpp — what the capture records besides the body (headers
// as the client gets them, trailers, nginx's flags), whether it can be sent
// again, and the upstream's control header taken out of every response.
// See docs/design.md#upstream-control.
#pragma once

#include <cstdint>

#include "request_ctx.hpp"
#include "upstream_control.hpp"

namespace idem {

// Content-Type as sent (with nginx's charset), a file's Last-Modified, and
// the list entries the response had at the upper point (plus a filter's
// Content-Encoding), without those that describe the connection or the
// moment. False when out of memory.
bool collect_headers(ngx_http_request_t* r, RequestCtx* ctx);

// As Header views. False when out of memory.
bool collect_trailers(ngx_http_request_t* r, ngx_array_t& out);

// Every entry of that name, any case, leaves the list (hash zeroed, as nginx
// deletes a header) in every response of the location, captured or not.
// Only for a `captured` one are the values parsed into `control`; nullptr
// when there was none. One warning per response, without the key.
const UpstreamControl* take_upstream_control(ngx_http_request_t* r, bool captured, UpstreamControl& control);

// Deleted ones too: where a filter's additions begin.
ngx_uint_t count_headers(ngx_list_t& list) noexcept;

// For the replay to be treated alike.
std::uint8_t response_flags(const ngx_http_request_t* r) noexcept;

// gRPC's status comes in trailers grpc_pass sets only after the body, so
// such a response is not joined live: duplicates get it from the store.
bool trailers_follow(const ngx_http_request_t* r) noexcept;

// By the rule the decoder applies to every stored response (replayable.hpp);
// MarkerWhy::unsaid when it can be sent again. Such a response still reaches
// its client; it is kept as the marker that says why.
MarkerWhy head_flaw(const RequestCtx* ctx) noexcept;
MarkerWhy trailers_flaw(const ngx_array_t& trailers) noexcept;

}  // namespace idem
