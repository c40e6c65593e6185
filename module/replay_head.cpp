// replay_head.cpp — see replay_head.hpp.

#include "replay_head.hpp"

#include "conf.hpp"
#include "send.hpp"
#include "sse.hpp"

namespace idem {
namespace {

ngx_str_t last_event_id = ngx_string("last-event-id");

bool equals_ci(std::string_view a, std::string_view b)
{
    return a.size() == b.size()
           && ngx_strncasecmp(reinterpret_cast<u_char*>(const_cast<char*>(a.data())),
                              reinterpret_cast<u_char*>(const_cast<char*>(b.data())), a.size()) == 0;
}

// The filters after the capture look at nginx's pointers, not the list (gzip,
// expires, not_modified), so a replay sets them where the upstream module set
// the original's, and both are treated alike.
struct KeptHeader {
    std::string_view name;
    ngx_table_elt_t* ngx_http_headers_out_t::*field;
};

constexpr KeptHeader kept_headers[] = {
    {"Content-Encoding", &ngx_http_headers_out_t::content_encoding},
    {"Location", &ngx_http_headers_out_t::location},
    {"Refresh", &ngx_http_headers_out_t::refresh},
    {"Last-Modified", &ngx_http_headers_out_t::last_modified},
    {"Content-Range", &ngx_http_headers_out_t::content_range},
    {"Accept-Ranges", &ngx_http_headers_out_t::accept_ranges},
    {"Expires", &ngx_http_headers_out_t::expires},
    {"ETag", &ngx_http_headers_out_t::etag},
};

// Repeated headers nginx keeps together: an array of pointers before
// nginx 1.23.0, a list linked through ngx_table_elt_t::next since.
#if nginx_version >= 1023000
using KeptList = ngx_table_elt_t*;
#else
using KeptList = ngx_array_t;
#endif

struct KeptHeaders {
    std::string_view name;
    KeptList ngx_http_headers_out_t::*field;
};

constexpr KeptHeaders kept_header_lists[] = {
    {"Cache-Control", &ngx_http_headers_out_t::cache_control},
    {"Link", &ngx_http_headers_out_t::link},
};

// After the ones before it.
bool keep_in_list(ngx_http_request_t* r, KeptList& list, ngx_table_elt_t* h)
{
#if nginx_version >= 1023000
    (void) r;
    ngx_table_elt_t** last = &list;
    while (*last != nullptr) {
        last = &(*last)->next;
    }
    *last = h;
    return true;
#else
    if (list.elts == nullptr && ngx_array_init(&list, r->pool, 2, sizeof(ngx_table_elt_t*)) != NGX_OK) {
        return false;
    }
    auto* slot = static_cast<ngx_table_elt_t**>(ngx_array_push(&list));
    if (slot == nullptr) {
        return false;
    }
    *slot = h;
    return true;
#endif
}

bool keep_where_nginx_does(ngx_http_request_t* r, ngx_table_elt_t* h, std::string_view name)
{
    ngx_http_headers_out_t& out = r->headers_out;
    for (const auto& k : kept_headers) {
        if (equals_ci(name, k.name)) {
            if (k.field == &ngx_http_headers_out_t::location && h->value.len > 0 && h->value.data[0] == '/') {
                return true;  // left relative, as the upstream module leaves it
            }
            out.*k.field = h;
            if (k.field == &ngx_http_headers_out_t::last_modified) {
                out.last_modified_time = ngx_parse_http_time(h->value.data, h->value.len);
            }
            return true;
        }
    }
    for (const auto& k : kept_header_lists) {
        if (equals_ci(name, k.name)) {
            return keep_in_list(r, out.*k.field, h);
        }
    }
    return true;
}

}  // namespace

ngx_int_t set_replay_headers(ngx_http_request_t* r, const Record& record) noexcept
{
    r->headers_out.status = record.status;

    HeaderReader headers(record);
    Header h;
    while (headers.next(h)) {
        if (equals_ci(h.name, "Content-Type")) {
            r->headers_out.content_type = {h.value.size(), bytes(h.value)};
            size_t type_len = h.value.find(';');
            r->headers_out.content_type_len = type_len == std::string_view::npos ? h.value.size() : type_len;
            r->headers_out.content_type_lowcase = nullptr;
            continue;
        }
        ngx_table_elt_t* entry = add_header(r, h.name, h.value);
        if (entry == nullptr || !keep_where_nginx_does(r, entry, h.name)) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));
    if (lcf->replayed_header.len != 0 && !add_header(r, view(lcf->replayed_header), "true")) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    // As nginx treated the original: sent whole (the capture sends a kept
    // response whole; the range flags of older records are not followed),
    // never made a 304 or 412 (the original was executed), and the
    // upstream's trailers after the body.
    r->allow_ranges = 0;
    r->disable_not_modified = 1;
    r->expect_trailers = (record.flags & expect_trailers) != 0;
#if (NGX_HTTP_GZIP)
    if (r->headers_out.content_encoding != nullptr) {
        // the body is stored encoded, as the client got it: gunzip, whose
        // body filter a replay does not pass, must leave it so
        r->gzip_tested = 1;
        r->gzip_ok = 1;
    }
#endif
    HeaderReader trailers = HeaderReader::trailers(record);
    while (trailers.next(h)) {
        if (push_header(r->headers_out.trailers, h.name, h.value) == nullptr) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    return NGX_OK;
}

std::string_view resume_id(ngx_http_request_t* r) noexcept
{
    const ngx_str_t& type = r->headers_out.content_type;
    if (type.len == 0 || !is_event_stream({reinterpret_cast<char*>(type.data), type.len})) {
        return {};
    }
    std::string_view id;
    for_each_header(r->headers_in.headers, [&](ngx_table_elt_t& h) {
        if (h.key.len == last_event_id.len && ngx_strncasecmp(h.key.data, last_event_id.data, h.key.len) == 0) {
            id = {reinterpret_cast<char*>(h.value.data), h.value.len};
            return false;
        }
        return true;
    });
    return id;
}

std::size_t resume_offset(ngx_http_request_t* r, std::string_view id, std::string_view body) noexcept
{
    std::size_t offset = sse_resume_offset(body, id);
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: event stream resumed after its Last-Event-ID at byte %uz of %uz", offset, body.size());
    return offset;
}

}  // namespace idem
