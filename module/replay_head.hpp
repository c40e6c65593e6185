// replay_head.hpp — what every answer that sends a stored or joined
// response shares: its head set as the record has it (a replay, a replay
// from pieces, a joiner), and where a reconnecting event stream resumes.
// On the floor below the answers (docs/design.md#layers), so that none of
// them calls another for these.
#pragma once

#include <string_view>

#include "ngx.hpp"
#include "record.hpp"

namespace idem {

// Sets the response's status, headers and trailers as `record` has them,
// plus the replay marker (idempotency_replayed_header), and treats it as
// nginx treated the original (a joiner's head too, which has no trailers:
// join.cpp; a response kept in pieces: piece_replay.cpp). NGX_OK, or the
// status to finalize with.
ngx_int_t set_replay_headers(ngx_http_request_t* r, const Record& record) noexcept;

// A retry of an event stream (docs/design.md#event-stream-resume), once its
// response headers are set: the request's Last-Event-ID if the response is
// an event stream (empty: none, or not an event stream), and where in the
// stream's `body` the retry resumes with it (0: from the start).
std::string_view resume_id(ngx_http_request_t* r) noexcept;
std::size_t resume_offset(ngx_http_request_t* r, std::string_view id, std::string_view body) noexcept;

}  // namespace idem
