// response.hpp — the few things the module needs to answer a request itself
// (replay.cpp, problem.cpp) and to read nginx's header lists.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

inline u_char* bytes(std::string_view s) noexcept
{
    return reinterpret_cast<u_char*>(const_cast<char*>(s.data()));
}

// Calls f(ngx_table_elt_t&) for each entry of an nginx header list, in
// order, until f returns false.
template <class F>
void for_each_header(ngx_list_t& list, F&& f)
{
    for (ngx_list_part_t* part = &list.part; part != nullptr; part = part->next) {
        auto* h = static_cast<ngx_table_elt_t*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (!f(h[i])) {
                return;
            }
        }
    }
}

// Appends a response header; name and value must live as long as the request.
bool add_header(ngx_http_request_t* r, std::string_view name, std::string_view value) noexcept;

// Sends the response header (status and headers already set), then `body`
// as the whole response body, with Content-Length.
ngx_int_t send_whole_body(ngx_http_request_t* r, std::string_view body) noexcept;

}  // namespace idem
