// replay.cpp — sends a stored response: its status, its headers in stored
// order (repeated ones kept), its body byte for byte, and
// `Idempotent-Replayed: true`. Date, Server and the hop-by-hop headers are
// nginx's own, fresh. The upstream is not contacted.

#include "conf.hpp"
#include "response.hpp"

namespace idem {
namespace {

bool equals_ci(std::string_view a, std::string_view b)
{
    return a.size() == b.size()
           && ngx_strncasecmp(reinterpret_cast<u_char*>(const_cast<char*>(a.data())),
                              reinterpret_cast<u_char*>(const_cast<char*>(b.data())), a.size()) == 0;
}

ngx_int_t send_record(ngx_http_request_t* r, const Record& record)
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
        if (!add_header(r, h.name, h.value)) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    if (!add_header(r, "Idempotent-Replayed", "true")) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return send_whole_body(r, record.body);
}

}  // namespace

ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx, std::string_view stored)
{
    std::optional<Record> record = decode_record(stored);
    if (!record || record->kind != RecordKind::response) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "idempotency: the record under \"%V\" cannot be decoded",
                      &ctx->redis_key);
        ctx->status = Status::unavailable;
        return send_problem(r, NGX_HTTP_SERVICE_UNAVAILABLE, 1);
    }
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "idempotency: replaying the response stored under \"%V\"",
                  &ctx->redis_key);
    ngx_http_finalize_request(r, send_record(r, *record));
    return NGX_DONE;
}

}  // namespace idem
