// ngx.hpp — nginx's C headers, behind extern "C". The only place the module
// crosses the C/C++ boundary in that direction.
#pragma once

#if __cplusplus < 201703L
#error "ngx_http_idempotency_module needs C++17 (g++ 11 or later compiles it by default)"
#endif

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_event_connect.h>
#include <ngx_http.h>
}

#include <string_view>

namespace idem {

inline std::string_view view(const ngx_str_t& s) noexcept
{
    return {reinterpret_cast<const char*>(s.data), s.len};
}

}  // namespace idem
