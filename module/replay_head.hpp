// replay_head.hpp — what every answer sending a stored or joined response
// shares, on the floor below them so none calls another
// (docs/design.md#layers).
#pragma once

#include <string_view>

#include "ngx.hpp"
#include "record.hpp"

namespace idem {

// Plus the replay header, treated as nginx treated the original. NGX_OK, or
// the status to finalize with.
ngx_int_t set_replay_headers(ngx_http_request_t* r, const Record& record) noexcept;

// docs/design.md#event-stream-resume. Once the headers are set: the
// Last-Event-ID if the response is an event stream (empty otherwise), and
// where in `body` the retry resumes (0: the start).
std::string_view resume_id(ngx_http_request_t* r) noexcept;
std::size_t resume_offset(ngx_http_request_t* r, std::string_view id, std::string_view body) noexcept;

}  // namespace idem
