// capture.hpp — the filters that record a claimed request's response
// (capture.cpp).
#pragma once

#include "request_ctx.hpp"

namespace idem {

ngx_int_t capture_init(ngx_conf_t* cf);
// The request was forwarded with the claim held: record its response.
void capture_begin(RequestCtx* ctx) noexcept;
// The request is over: settle a claim whose response never completed.
void capture_settle(RequestCtx* ctx) noexcept;

}  // namespace idem
