// replay.hpp — sends a stored response (replay.cpp).
#pragma once

#include <string_view>

#include "request_ctx.hpp"

namespace idem {

ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx, std::string_view stored);

}  // namespace idem
