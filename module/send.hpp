// send.hpp — what the module needs to answer a request itself and to read
// nginx's header lists.
#pragma once

#include <string_view>
#include <utility>

#include "ngx.hpp"

namespace idem {

inline u_char* bytes(std::string_view s) noexcept
{
    return reinterpret_cast<u_char*>(const_cast<char*>(s.data()));
}

// In order, until f returns false.
template <class T, class F>
void for_each_entry(ngx_list_t& list, F&& f)
{
    for (ngx_list_part_t* part = &list.part; part != nullptr; part = part->next) {
        auto* entries = static_cast<T*>(part->elts);
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (!f(entries[i])) {
                return;
            }
        }
    }
}

template <class F>
void for_each_header(ngx_list_t& list, F&& f)
{
    for_each_entry<ngx_table_elt_t>(list, std::forward<F>(f));
}

// Name and value must live as long as the request; nullptr when out of memory.
ngx_table_elt_t* push_header(ngx_list_t& list, std::string_view name, std::string_view value) noexcept;

inline ngx_table_elt_t* add_header(ngx_http_request_t* r, std::string_view name, std::string_view value) noexcept
{
    return push_header(r->headers_out.headers, name, value);
}

// `type` must outlive the request.
ngx_int_t send_uncached(ngx_http_request_t* r, ngx_uint_t status, std::string_view type,
                        std::string_view body) noexcept;

// Status and headers already set. No Content-Length when trailers follow.
ngx_int_t send_whole_body(ngx_http_request_t* r, std::string_view body, bool trailers_follow = false) noexcept;

// From an event handler; runs what the connection posted, as nginx's own
// handlers do. On return r and its pool may be gone: touch neither.
void end_request(ngx_http_request_t* r, ngx_int_t rc) noexcept;

// As nginx's writer does (send_timeout, send_lowat); false when the write
// event cannot be armed.
bool await_client(ngx_http_request_t* r) noexcept;

// As nginx's own writer reads it: `wait` when limit_rate holds it back (the
// event is armed again); `ready` removes the send_timeout timer.
enum class ClientWrite { ready, wait, timed_out, failed };
ClientWrite client_write_event(ngx_http_request_t* r) noexcept;

}  // namespace idem
