// problem.hpp — the module's own errors: problem+json, or nginx's error_page
// for that status (problem.cpp).
#pragma once

#include "ngx.hpp"
#include "outcome.hpp"

namespace idem {

// The outcome's own answer (outcome.hpp's table): its status, Retry-After
// and problem document, or nginx's error_page for that status.
ngx_int_t send_problem(ngx_http_request_t* r, const OutcomeInfo& outcome);

}  // namespace idem
