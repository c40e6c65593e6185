// piece_replay.hpp — replays a response kept in pieces: one look at every
// piece first, 410 when one is missing, foreign or altered (never part of a
// response, never a second execution); then one piece at a time, each read
// once the client took the one before. See
// docs/design.md#large-responses-in-pieces.
#pragma once

#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// ctx->stored is a version-4 record. NGX_DONE: finalized when the replay ends.
ngx_int_t replay_pieces(ngx_http_request_t* r, RequestCtx* ctx) noexcept;

}  // namespace idem
