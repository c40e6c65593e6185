// problem.cpp — the module's own error answers: RFC 9457 problem+json, with
// Retry-After where a retry can succeed. A location's error_page for the
// status answers instead, so an API keeps its own error shape; Retry-After
// and $idempotency_status stay available there.
// See docs/design.md#problem-answers.

#include "problem.hpp"
#include "send.hpp"

namespace idem {
namespace {

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

}  // namespace

ngx_int_t send_problem_document(ngx_http_request_t* r, ngx_uint_t status, const Problem& p)
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

void answer_problem(ngx_http_request_t* r, const OutcomeInfo& outcome) noexcept
{
    ngx_uint_t retry_after = outcome.retry_after;
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        r->keepalive = 0;
    }
    if (retry_after) {
        auto* value = static_cast<u_char*>(ngx_pnalloc(r->pool, NGX_INT_T_LEN));
        size_t len = value != nullptr ? static_cast<size_t>(ngx_sprintf(value, "%ui", retry_after) - value) : 0;
        if (value == nullptr || !add_header(r, "Retry-After", {reinterpret_cast<char*>(value), len})) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }
    }
    if (has_error_page(r, outcome.http_status)) {
        ngx_http_finalize_request(r, static_cast<ngx_int_t>(outcome.http_status));  // nginx's error_page answers
        return;
    }
    ngx_http_finalize_request(r, send_problem_document(r, outcome.http_status, outcome.problem));
}

}  // namespace idem
