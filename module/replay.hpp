// replay.hpp — sends a stored response (replay.cpp).
#pragma once

#include "request_ctx.hpp"

namespace idem {

// Sets the response's status, headers and trailers as `record` has them,
// plus the replay marker (idempotency_replayed_header), and treats it as
// nginx treated the original (a joiner's head too, which has no trailers:
// join.cpp; a response kept in pieces: piece_replay.cpp). NGX_OK, or the
// status to finalize with.
ngx_int_t set_replay_headers(ngx_http_request_t* r, const Record& record) noexcept;

// Sends ctx->stored, the response the claim found.
ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx);

}  // namespace idem
