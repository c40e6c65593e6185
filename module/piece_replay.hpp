// piece_replay.hpp — replays a response kept in pieces (pieces.hpp,
// docs/design.md#large-responses-in-pieces): one look at every piece
// first, and 410 when one is missing, of another response or altered —
// never a part of a response, never a second execution; then the header,
// and the pieces one at a time, each read from the store once the client
// has taken the one before: a replay holds one piece, not the response.
#pragma once

#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// Replays ctx->stored, a record of version 4; NGX_DONE (the request is
// finalized when the replay ends).
ngx_int_t replay_pieces(ngx_http_request_t* r, RequestCtx* ctx) noexcept;

}  // namespace idem
