// replay.cpp — sends a stored response without contacting the upstream: status,
// headers in stored order, body byte for byte, and the replay header; Date,
// Server and hop-by-hop headers are nginx's own. The header passes every
// header filter as the original's did; the body goes straight below the
// capture's point, so SSI, addition and sub_filter do not run again.
// See docs/design.md#replay-as-received.

#include "replay.hpp"

#include "piece_replay.hpp"
#include "replay_head.hpp"
#include "request_ctx.hpp"
#include "send.hpp"

namespace idem {

namespace {

ngx_int_t send_record(ngx_http_request_t* r, const Record& record)
{
    ngx_int_t rc = set_replay_headers(r, record);
    if (rc != NGX_OK) {
        return rc;
    }

    // a reconnecting event stream gets what follows its last event
    std::string_view body = record.body;
    std::string_view id = resume_id(r);
    if (!id.empty()) {
        body.remove_prefix(resume_offset(r, id, body));
    }
    return send_whole_body(r, body, record.trailer_count != 0 || r->expect_trailers);
}

}  // namespace

ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx)
{
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "idempotency: replaying the response stored under \"%V\"",
                  &ctx->claim.key);
    ngx_int_t rc = ctx->stored->pieces.count != 0 ? replay_pieces(r, ctx) : send_record(r, *ctx->stored);
    if (rc != NGX_DONE) {
        ngx_http_finalize_request(r, rc);
    }
    return NGX_DONE;
}

}  // namespace idem
