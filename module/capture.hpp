// capture.hpp — the filters that record a claimed request's response
// (capture.cpp).
#pragma once

#include "request_ctx.hpp"

namespace idem {

// Postconfiguration of the capture module: the filters of the lower point,
// right below postpone (see capture.cpp).
ngx_int_t capture_init(ngx_conf_t* cf);
// Postconfiguration of the main module: the filters of the upper point,
// right below not_modified.
ngx_int_t capture_upper_init(ngx_conf_t* cf);
// The request was forwarded with the claim held: record its response.
void capture_begin(RequestCtx* ctx) noexcept;
// The request is over: settle a claim whose response never completed.
void capture_settle(RequestCtx* ctx) noexcept;

}  // namespace idem
