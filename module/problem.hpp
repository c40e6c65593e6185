// problem.hpp — the module's own errors: problem+json, or nginx's error_page
// for that status (problem.cpp).
#pragma once

#include "ngx.hpp"
#include "outcome.hpp"

namespace idem {

// The outcome's own answer (outcome.hpp's table): its status, Retry-After
// and problem document, or nginx's error_page for that status. It ends the
// request: when it returns, r and its pool may be gone, and the caller
// touches neither (in a phase handler it returns NGX_DONE).
void answer_problem(ngx_http_request_t* r, const OutcomeInfo& outcome) noexcept;

// The problem document alone (its type under the module's URN), as the
// response: what send_problem sends when no error_page answers, and the
// admin endpoint's errors.
ngx_int_t send_problem_document(ngx_http_request_t* r, ngx_uint_t status, const Problem& problem);

}  // namespace idem
