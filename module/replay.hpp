// replay.hpp — sends a stored response. See docs/design.md#replay.
#pragma once

#include "request_ctx.hpp"

namespace idem {

ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace idem
