// upstream_attempts.hpp — what nginx's own record of a request's upstream
// attempts says, in disposition.hpp's terms: which peers were tried, which
// may have received the request, which answered. Reads r->upstream_states
// and r->upstream only; changes nothing.
#pragma once

#include "disposition.hpp"
#include "ngx.hpp"

namespace idem {

// `answering` is the attempt whose answer is the response being sent,
// nullptr when nginx answers (its own error, error_page, X-Accel-Redirect).
// An answer with a status of `declining` counts as declined.
UpstreamFacts upstream_facts(ngx_http_request_t* r, const ngx_http_upstream_state_t* answering,
                             const ReleaseStatuses& declining = {}) noexcept;

bool upstream_answers(ngx_http_request_t* r) noexcept;

}  // namespace idem
