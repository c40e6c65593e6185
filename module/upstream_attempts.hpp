// upstream_attempts.hpp — nginx's record of a request's upstream attempts in
// disposition.hpp's terms. Reads r->upstream_states and r->upstream only.
// See docs/design.md#not-executed.
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
