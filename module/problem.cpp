// problem.cpp — the module's own error answers: application/problem+json
// bodies per RFC 9457 (type, title, status, detail), with Retry-After where
// a retry can succeed. Where the location has an error_page for the status,
// nginx's error_page answers instead, so an API keeps its own error shape;
// Retry-After and $idempotency_status stay available there.

#include "problem.hpp"
#include "request_ctx.hpp"
#include "response.hpp"

namespace idem {
namespace {

struct Problem {
    ngx_uint_t status;
    std::string_view type;
    std::string_view title;
    std::string_view detail;
};

constexpr Problem problems[] = {
    {NGX_HTTP_BAD_REQUEST, "missing-key", "Idempotency key missing",
     "This request must carry an idempotency key header."},
    {NGX_HTTP_BAD_REQUEST, "invalid-key", "Invalid idempotency key",
     "The idempotency key must appear once and be 1 to 255 visible ASCII characters, bare or as a quoted string."},
    {NGX_HTTP_CONFLICT, "request-in-progress", "Request in progress",
     "A request with this idempotency key is still being processed. Retry later to get its response."},
    {410, "response-not-replayable", "Response cannot be replayed",
     "The request with this idempotency key was executed (or reached the upstream and may have been), but its response could not be stored and cannot be replayed. It is not executed again."},
    {410, "response-unverifiable", "Stored response failed verification",
     "The stored response for this idempotency key failed its integrity check and is not replayed. The request is not executed again."},
    {422, "key-reused", "Idempotency key reused",
     "This idempotency key was already used for a different request (method, URI or body)."},
    {NGX_HTTP_SERVICE_UNAVAILABLE, "store-unavailable", "Idempotency store unavailable",
     "The request was not forwarded because its idempotency key could not be checked. Retry later."},
};

const Problem& problem_for(ngx_uint_t status, const RequestCtx* ctx)
{
    Status why = ctx ? ctx->status : Status::none;
    if (status == NGX_HTTP_BAD_REQUEST) {
        return why == Status::missing ? problems[0] : problems[1];
    }
    if (status == 410 && ctx && ctx->unverifiable) {
        return problems[4];
    }
    for (const auto& p : problems) {
        if (p.status == status) {
            return p;
        }
    }
    return problems[6];
}

bool has_error_page(ngx_http_request_t* r, ngx_uint_t status)
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_get_module_loc_conf(r, ngx_http_core_module));
    if (clcf->error_pages == nullptr || r->uri_changes == 0) {
        return false;
    }
    auto* pages = static_cast<ngx_http_err_page_t*>(clcf->error_pages->elts);
    for (ngx_uint_t i = 0; i < clcf->error_pages->nelts; i++) {
        if (static_cast<ngx_uint_t>(pages[i].status) == status) {
            return true;
        }
    }
    return false;
}

ngx_int_t send_json(ngx_http_request_t* r, ngx_uint_t status, const Problem& p)
{
    static constexpr size_t overhead = sizeof(R"({"type":"urn:nginx-idempotency:problem:","title":"","status":000,"detail":""})");
    size_t size = overhead + p.type.size() + p.title.size() + p.detail.size();
    auto* body = static_cast<u_char*>(ngx_pnalloc(r->pool, size));
    if (body == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_str_t type{p.type.size(), reinterpret_cast<u_char*>(const_cast<char*>(p.type.data()))};
    ngx_str_t title{p.title.size(), reinterpret_cast<u_char*>(const_cast<char*>(p.title.data()))};
    ngx_str_t detail{p.detail.size(), reinterpret_cast<u_char*>(const_cast<char*>(p.detail.data()))};
    u_char* end = ngx_sprintf(body, R"({"type":"urn:nginx-idempotency:problem:%V","title":"%V","status":%ui,"detail":"%V"})",
                              &type, &title, status, &detail);

    r->headers_out.status = status;
    if (status == 422) {
        // nginx 1.22 has no reason phrase for 422 and would send "422 "
        ngx_str_set(&r->headers_out.status_line, "422 Unprocessable Content");
    }
    ngx_str_set(&r->headers_out.content_type, "application/problem+json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = nullptr;

    return send_whole_body(r, {reinterpret_cast<char*>(body), static_cast<size_t>(end - body)});
}

}  // namespace

ngx_int_t send_problem(ngx_http_request_t* r, ngx_uint_t status, ngx_uint_t retry_after)
{
    RequestCtx* ctx = find_ctx(r);
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        r->keepalive = 0;
    }
    if (retry_after) {
        auto* value = static_cast<u_char*>(ngx_pnalloc(r->pool, NGX_INT_T_LEN));
        if (value == nullptr) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        size_t len = static_cast<size_t>(ngx_sprintf(value, "%ui", retry_after) - value);
        if (!add_header(r, "Retry-After", {reinterpret_cast<char*>(value), len})) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    if (has_error_page(r, status)) {
        return status;  // nginx's error_page answers
    }
    ngx_http_finalize_request(r, send_json(r, status, problem_for(status, ctx)));
    return NGX_DONE;
}

}  // namespace idem
