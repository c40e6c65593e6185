// send.cpp — see send.hpp.

#include "send.hpp"

namespace idem {

ngx_table_elt_t* push_header(ngx_list_t& list, std::string_view name, std::string_view value) noexcept
{
    auto* h = static_cast<ngx_table_elt_t*>(ngx_list_push(&list));
    if (h == nullptr) {
        return nullptr;
    }
    h->hash = 1;
    h->key = {name.size(), bytes(name)};
    h->value = {value.size(), bytes(value)};
    h->lowcase_key = nullptr;
#if nginx_version >= 1023000
    h->next = nullptr;  // since 1.23.0 nginx links repeated headers through it
#endif
    return h;
}

ngx_int_t send_whole_body(ngx_http_request_t* r, std::string_view body, bool trailers_follow) noexcept
{
    r->headers_out.content_length_n = trailers_follow ? -1 : static_cast<off_t>(body.size());
    ngx_int_t rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    auto* b = static_cast<ngx_buf_t*>(ngx_calloc_buf(r->pool));
    if (b == nullptr) {
        return NGX_ERROR;
    }
    b->pos = bytes(body);
    b->last = b->pos + body.size();
    b->memory = body.empty() ? 0 : 1;
    b->last_buf = 1;
    b->last_in_chain = 1;
    ngx_chain_t out{b, nullptr};
    return ngx_http_output_filter(r, &out);
}

ngx_int_t send_uncached(ngx_http_request_t* r, ngx_uint_t status, std::string_view type,
                        std::string_view body) noexcept
{
    r->headers_out.status = status;
    r->headers_out.content_type = {type.size(), bytes(type)};
    r->headers_out.content_type_len = type.size();
    if (!add_header(r, "Cache-Control", "no-store")) {
        return NGX_ERROR;
    }
    return send_whole_body(r, body);
}

void end_request(ngx_http_request_t* r, ngx_int_t rc) noexcept
{
    ngx_connection_t* c = r->connection;
    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}

bool await_client(ngx_http_request_t* r) noexcept
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_get_module_loc_conf(r, ngx_http_core_module));
    ngx_event_t* wev = r->connection->write;
    if (!wev->delayed && !wev->timer_set) {
        ngx_add_timer(wev, clcf->send_timeout);
    }
    return ngx_handle_write_event(wev, clcf->send_lowat) == NGX_OK;
}

ClientWrite client_write_event(ngx_http_request_t* r) noexcept
{
    ngx_event_t* wev = r->connection->write;
    if (wev->timedout) {
        r->connection->timedout = 1;
        ngx_log_error(NGX_LOG_INFO, r->connection->log, NGX_ETIMEDOUT, "client timed out");
        return ClientWrite::timed_out;
    }
    if (wev->delayed) {
        auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_get_module_loc_conf(r, ngx_http_core_module));
        return ngx_handle_write_event(wev, clcf->send_lowat) == NGX_OK ? ClientWrite::wait : ClientWrite::failed;
    }
    if (wev->timer_set) {
        ngx_del_timer(wev);
    }
    return ClientWrite::ready;
}

}  // namespace idem
