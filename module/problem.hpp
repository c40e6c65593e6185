// problem.hpp — the module's own errors: problem+json, or nginx's error_page
// for that status (problem.cpp).
#pragma once

#include "ngx.hpp"

namespace idem {

ngx_int_t send_problem(ngx_http_request_t* r, ngx_uint_t status, ngx_uint_t retry_after);

}  // namespace idem
