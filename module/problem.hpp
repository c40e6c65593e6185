// problem.hpp — the module's own errors: problem+json, or nginx's error_page.
#pragma once

#include "ngx.hpp"
#include "outcome.hpp"

namespace idem {

// Status, Retry-After and problem document (outcome.hpp), or error_page. Ends
// the request: on return r and its pool may be gone; touch neither (a phase
// handler returns NGX_DONE).
void answer_problem(ngx_http_request_t* r, const OutcomeInfo& outcome) noexcept;

// Sent when no error_page answers, and for the admin endpoint's errors.
ngx_int_t send_problem_document(ngx_http_request_t* r, ngx_uint_t status, const Problem& problem);

}  // namespace idem
