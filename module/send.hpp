// send.hpp — the few things the module needs to answer a request itself
// (replay.cpp, problem.cpp) and to read nginx's header lists.
#pragma once

#include <string_view>
#include <utility>

#include "ngx.hpp"

namespace idem {

inline u_char* bytes(std::string_view s) noexcept
{
    return reinterpret_cast<u_char*>(const_cast<char*>(s.data()));
}

// Calls f(T&) for each entry of an nginx list of T, in order, until f
// returns false.
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

// The same for a header list.
template <class F>
void for_each_header(ngx_list_t& list, F&& f)
{
    for_each_entry<ngx_table_elt_t>(list, std::forward<F>(f));
}

// Appends a header to `list` (r->headers_out.headers or .trailers); name
// and value must live as long as the request. Returns the list entry,
// nullptr when out of memory.
ngx_table_elt_t* push_header(ngx_list_t& list, std::string_view name, std::string_view value) noexcept;

inline ngx_table_elt_t* add_header(ngx_http_request_t* r, std::string_view name, std::string_view value) noexcept
{
    return push_header(r->headers_out.headers, name, value);
}

// A whole answer of the module's own that no cache keeps: `status`, the
// Content-Type `type` (a string that outlives the request), `body`.
ngx_int_t send_uncached(ngx_http_request_t* r, ngx_uint_t status, std::string_view type,
                        std::string_view body) noexcept;

// Sends the response header (status and headers already set), then `body`
// as the whole response body, with Content-Length, or without one when
// trailers follow it (as a stream that ends with them, as an upstream
// sends them).
ngx_int_t send_whole_body(ngx_http_request_t* r, std::string_view body, bool trailers_follow = false) noexcept;

// Ends the request with `rc` from an event handler (a store's answer, a
// timer, the client's write event), then runs what the connection has
// posted, as nginx's own handlers do. When it returns, r and its pool may
// be gone: the caller touches neither.
void end_request(ngx_http_request_t* r, ngx_int_t rc) noexcept;

// The response waits for the client to take what it holds, as nginx's
// writer does (send_timeout, send_lowat); false when the write event
// cannot be armed.
bool await_client(ngx_http_request_t* r) noexcept;

// What a write event means for a response sent in parts, as nginx's own
// writer reads it: the client timed out (send_timeout; logged), the write
// is held back by limit_rate (wait: the event is armed again), or the
// client can take more (its send_timeout timer removed).
enum class ClientWrite { ready, wait, timed_out, failed };
ClientWrite client_write_event(ngx_http_request_t* r) noexcept;

}  // namespace idem
