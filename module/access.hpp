// access.hpp — the pre-content phase handler (access.cpp).
#pragma once

#include "ngx.hpp"

namespace idem {

ngx_int_t precontent_handler(ngx_http_request_t* r);

}  // namespace idem
