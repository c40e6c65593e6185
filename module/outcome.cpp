// outcome.cpp — see outcome.hpp.

#include "outcome.hpp"

namespace idem {
namespace {

constexpr OutcomeInfo outcomes[outcome_count] = {
    {{}, Outcome::none, 0, 0, {}},
    {"new", Outcome::fresh, 0, 0, {}},
    {"replayed", Outcome::replayed, 0, 0, {}},
    {"waited", Outcome::waited, 0, 0, {}},
    {"conflict", Outcome::conflict, 409, 1,
     {"request-in-progress", "Request in progress",
      "A request with this idempotency key is still being processed. Retry later to get its response."}},
    {"mismatch", Outcome::mismatch, 422, 0,
     {"key-reused", "Idempotency key reused",
      "This idempotency key was already used for a different request (method, URI or body)."}},
    {"invalid", Outcome::invalid, 400, 0,
     {"invalid-key", "Invalid idempotency key",
      "The idempotency key must appear once and be 1 to 255 visible ASCII characters, bare or as a quoted string."}},
    {"missing", Outcome::missing, 400, 0,
     {"missing-key", "Idempotency key missing", "This request must carry an idempotency key header."}},
    {"unavailable", Outcome::unavailable, 503, 1,
     {"store-unavailable", "Idempotency store unavailable",
      "The request was not forwarded because its idempotency key could not be checked. Retry later."}},
    {"released", Outcome::released, 0, 0, {}},
    {"unreplayable", Outcome::unreplayable, 410, 0,
     {"response-not-replayable", "Response cannot be replayed",
      "The request with this idempotency key was executed (or reached the upstream and may have been), but its "
      "response could not be stored and cannot be replayed. It is not executed again."}},
    {"unreplayable", Outcome::unreplayable, 410, 0,
     {"response-unverifiable", "Stored response failed verification",
      "The stored response for this idempotency key failed its integrity check and is not replayed. The request is "
      "not executed again."}},
    {"joined", Outcome::joined, 0, 0, {}},
    {"invalid", Outcome::invalid, 400, 0,
     {"body-unreadable", "Request body cannot be fingerprinted",
      "This endpoint tells retries apart by the content of the request body, and this body cannot be read so."}},
};

// Each row that is a series of its own sits at its outcome's index; a row
// counted as another comes after it, under its name.
constexpr bool rows_in_order() noexcept
{
    for (unsigned i = 0; i < outcome_count; i++) {
        auto as = static_cast<unsigned>(outcomes[i].counted_as);
        if (as > i || outcomes[as].counted_as != static_cast<Outcome>(as) || outcomes[as].name != outcomes[i].name) {
            return false;
        }
    }
    return true;
}
static_assert(rows_in_order());

}  // namespace

const OutcomeInfo& outcome_info(Outcome outcome) noexcept
{
    auto i = static_cast<unsigned>(outcome);
    return outcomes[i < outcome_count ? i : 0];
}

}  // namespace idem
