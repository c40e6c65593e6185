// capture_headers.cpp — see capture_headers.hpp.

#include "capture_headers.hpp"

#include "replayable.hpp"
#include "send.hpp"

namespace idem {
namespace {

// They describe this connection or moment, not the response: a replay gets its own.
bool is_fresh_per_response(const ngx_str_t& name, const ngx_str_t& replayed)
{
    if (name.len == replayed.len && name.len != 0 && ngx_strncasecmp(name.data, replayed.data, name.len) == 0) {
        return true;  // the replay marker (idempotency_replayed_header) is the replay's own
    }
    static const ngx_str_t names[] = {
        ngx_string("connection"),     ngx_string("keep-alive"),        ngx_string("transfer-encoding"),
        ngx_string("te"),             ngx_string("trailer"),           ngx_string("upgrade"),
        ngx_string("proxy-connection"), ngx_string("date"),            ngx_string("server"),
        ngx_string("content-length"),
    };
    for (const auto& n : names) {
        if (name.len == n.len && ngx_strncasecmp(name.data, n.data, n.len) == 0) {
            return true;
        }
    }
    return false;
}

bool push_header(RequestCtx* ctx, std::string_view name, std::string_view value)
{
    auto* h = static_cast<Header*>(ngx_array_push(&ctx->capture.headers));
    if (h == nullptr) {
        return false;
    }
    h->name = name;
    h->value = value;
    return true;
}

// Their hash zeroed, their values read as one.
UpstreamControl take_control_entries(ngx_http_request_t* r, const ngx_str_t& name, bool& found)
{
    UpstreamControlParser parser;
    found = false;
    for_each_header(r->headers_out.headers, [&](ngx_table_elt_t& h) {
        if (h.hash != 0 && h.key.len == name.len && ngx_strncasecmp(h.key.data, name.data, name.len) == 0) {
            h.hash = 0;
            found = true;
            parser.add(view(h.value));
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "idempotency: the upstream's \"%V: %V\" taken out of the response", &h.key, &h.value);
        }
        return true;
    });
    return parser.result();
}

}  // namespace

bool collect_headers(ngx_http_request_t* r, RequestCtx* ctx)
{
    if (ngx_array_init(&ctx->capture.headers, r->pool, 8, sizeof(Header)) != NGX_OK) {
        return false;
    }
    ngx_http_headers_out_t& out = r->headers_out;
    if (out.content_type.len) {
        ngx_str_t type = out.content_type;
        if (out.content_type_len == out.content_type.len && out.charset.len) {
            // nginx appends the charset when it sends; keep what the client saw
            type.data = static_cast<u_char*>(ngx_pnalloc(r->pool, out.content_type.len + 10 + out.charset.len));
            if (type.data == nullptr) {
                return false;
            }
            type.len = static_cast<size_t>(ngx_sprintf(type.data, "%V; charset=%V", &out.content_type, &out.charset) - type.data);
        }
        if (!push_header(ctx, "Content-Type", view(type))) {
            return false;
        }
    }

    if (out.last_modified == nullptr && out.last_modified_time != -1) {
        // a file's date (static, X-Accel-Redirect): nginx writes the header
        // from the time alone
        auto* date = static_cast<u_char*>(ngx_pnalloc(r->pool, sizeof("Mon, 28 Sep 1970 06:00:00 GMT") - 1));
        if (date == nullptr) {
            return false;
        }
        size_t len = static_cast<size_t>(ngx_http_time(date, out.last_modified_time) - date);
        if (!push_header(ctx, "Last-Modified", {reinterpret_cast<char*>(date), len})) {
            return false;
        }
    }

    // as the filters in between left them at the upper point (expires, gunzip);
    // those filters add (add_header, expires, userid) are added again to every
    // replay, but a Content-Encoding, which says what the recorded body is
    bool ok = true;
    ngx_uint_t index = 0;
    for_each_header(out.headers, [&](ngx_table_elt_t& h) {
        bool added = index++ >= ctx->capture.upper_headers;
        if (added && &h != out.content_encoding) {
            return true;
        }
        if (h.hash != 0 && !is_fresh_per_response(h.key, ctx->conf->replayed_header)) {
            ok = push_header(ctx, view(h.key), view(h.value));
        }
        return ok;
    });
    return ok;
}

const UpstreamControl* take_upstream_control(ngx_http_request_t* r, bool captured, UpstreamControl& control)
{
    auto* lcf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));
    if (lcf == nullptr || lcf->upstream_control.len == 0) {
        return nullptr;
    }
    bool found = false;
    control = take_control_entries(r, lcf->upstream_control, found);
    if (!found || !captured) {
        return nullptr;
    }
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: the upstream asked: storage %s, ttl %uL s, %ui part(s) ignored (%s)",
                   control.storage == StorageAsk::store      ? "store"
                   : control.storage == StorageAsk::no_store ? "no-store"
                                                              : "as configured",
                   control.ttl_s, static_cast<ngx_uint_t>(control.problems), describe(control.problem));
    if (control.problems != 0) {
        // the first part ignored, quoted (at most `shown` bytes of it)
        constexpr size_t shown = 64;
        size_t len = ngx_min(control.problem_at.size(), shown);
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "idempotency: %ui part(s) of the upstream's \"%V\" header ignored: %s%s%*s%s",
                      static_cast<ngx_uint_t>(control.problems), &lcf->upstream_control, describe(control.problem),
                      len != 0 ? " \"" : "", len, control.problem_at.data(),
                      len == 0 ? "" : control.problem_at.size() > shown ? "...\"" : "\"");
    }
    return &control;
}

ngx_uint_t count_headers(ngx_list_t& list) noexcept
{
    ngx_uint_t n = 0;
    for (ngx_list_part_t* part = &list.part; part != nullptr; part = part->next) {
        n += part->nelts;
    }
    return n;
}

std::uint8_t response_flags(const ngx_http_request_t* r) noexcept
{
    return static_cast<std::uint8_t>((r->allow_ranges ? allow_ranges : 0) | (r->single_range ? single_range : 0)
                                     | (r->expect_trailers ? expect_trailers : 0));
}

bool trailers_follow(const ngx_http_request_t* r) noexcept
{
    static const ngx_str_t grpc = ngx_string("application/grpc");
    const ngx_str_t& type = r->headers_out.content_type;
    return r->expect_trailers
           || (type.len >= grpc.len && ngx_strncasecmp(type.data, grpc.data, grpc.len) == 0
               && (type.len == grpc.len || type.data[grpc.len] == '+' || type.data[grpc.len] == ';'));
}

// add_trailer's are added below the capture, to the replay as to the original.
bool collect_trailers(ngx_http_request_t* r, ngx_array_t& out)
{
    if (ngx_array_init(&out, r->pool, 2, sizeof(Header)) != NGX_OK) {
        return false;
    }
    bool ok = true;
    for_each_header(r->headers_out.trailers, [&](ngx_table_elt_t& h) {
        if (h.hash != 0) {
            auto* t = static_cast<Header*>(ngx_array_push(&out));
            ok = t != nullptr;
            if (ok) {
                *t = {view(h.key), view(h.value)};
            }
        }
        return ok;
    });
    return ok;
}

MarkerWhy head_flaw(const RequestCtx* ctx) noexcept
{
    return marker_why(response_flaw(static_cast<unsigned>(ctx->response_status),
                                    static_cast<const Header*>(ctx->capture.headers.elts), ctx->capture.headers.nelts));
}

MarkerWhy trailers_flaw(const ngx_array_t& trailers) noexcept
{
    return marker_why(headers_flaw(static_cast<const Header*>(trailers.elts), trailers.nelts));
}

}  // namespace idem
