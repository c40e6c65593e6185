// outcome.hpp — what a request gets from the module: one name for it and one
// table to what is sent. Pure. See docs/design.md#problem-answers.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem {

enum class Outcome : std::uint8_t {
    none,          // the module does not act on the request
    fresh,         // the claim is ours: forwarded upstream ("new")
    replayed,      // a stored response with our fingerprint, replayed
    waited,        // replayed after waiting for the original (idempotency_wait)
    conflict,      // 409: the original is still in flight
    mismatch,      // 422: the key was used for another request
    invalid,       // 400: the key is malformed
    missing,       // 400: the location requires a key
    unavailable,   // 503, or forwarded with idempotency_fail_open: the store cannot say
    released,      // forwarded, and the key freed again (docs/design.md#not-executed)
    unreplayable,  // 410: executed, and its response cannot be replayed
    unverifiable,  // 410: the stored record does not open (encryption at rest)
    joined,        // joined the original's response as it streams (idempotency_wait)
    unreadable,    // 400 ("invalid"): the body is not what idempotency_fingerprint reads it as
};
constexpr unsigned outcome_count = static_cast<unsigned>(Outcome::unreadable) + 1;

// An RFC 9457 problem document, type under urn:nginx-idempotency:problem:.
struct Problem {
    std::string_view type;
    std::string_view title;
    std::string_view detail;
};

struct OutcomeInfo {
    std::string_view name;    // $idempotency_status and the metrics label
    Outcome counted_as;       // the metrics series (and name) it shares
    unsigned http_status;     // the module's own answer; 0: forwarded or replayed
    unsigned retry_after;     // seconds; 0: no Retry-After
    Problem problem;          // the body of that answer
};

const OutcomeInfo& outcome_info(Outcome outcome) noexcept;

}  // namespace idem
