// access.hpp — the pre-content phase handler (access.cpp).
#pragma once

#include "ngx.hpp"

namespace idem {

ngx_int_t precontent_handler(ngx_http_request_t* r);

// The request header named `lowcase_name` (lower case): none, one (its
// value into `value`), or more than one (a request that names two keys).
enum class KeyLookup { none, one, many };
KeyLookup find_key_header(ngx_http_request_t* r, const ngx_str_t& lowcase_name, ngx_str_t& value);

}  // namespace idem
