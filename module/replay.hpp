// replay.hpp — sends a stored response (replay.cpp).
#pragma once

#include "request_ctx.hpp"

namespace idem {

// Sends ctx->stored, the response the claim found.
ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace idem
