// upstream_control.hpp — the upstream's word on its own answer
// (idempotency_upstream_control NAME): the value of its response header
// NAME, read as a list of directives in the manner of Cache-Control, tells
// whether the answer is stored and for how long. Pure: capture_headers.cpp
// takes the header out of the response and hands its values here; the
// verdict is disposition.hpp's (StorageAsk), the lifetime the claim's.
//
// The parse rules:
//   - the value is a comma-separated list; several headers of the name
//     (whatever the case of their names) read as one list joined by commas;
//     empty elements are skipped; spaces and tabs around an element and
//     around its "=" are ignored;
//   - directive names are case-insensitive:
//       no-store      do not store this answer (the key is released)
//       store         store it even if it is a 5xx or a status of
//                     idempotency_release_statuses
//       ttl=SECONDS   store it for SECONDS instead of idempotency_ttl: a
//                     positive decimal integer, optionally in double quotes;
//                     above max_ttl_s (365 days) it is taken as max_ttl_s,
//                     with a warning: no answer is worth keeping longer, and
//                     a larger number is more likely milliseconds by mistake
//   - what cannot be understood is ignored, and the configuration decides
//     in its place: an unknown directive, a value given to store or
//     no-store, a ttl without a positive integer (0, negative, not a
//     number, empty), two ttls that differ (the ttl is ignored);
//   - "store" with "no-store" contradict each other: the whole header is
//     ignored (the configuration decides whether and how long);
//   - every such problem is reported (the first one met, the count), for
//     one warning per response.
// What is heeded: only the upstream's own answer's header (not an answer
// nginx made, an error_page's or after X-Accel-Redirect), and never when
// nginx did not reach the upstream (released whatever it says); ttl only
// when the answer is stored, for its record or for the 410 marker that
// stands for it when it turns out too large to keep.
#pragma once

#include <cstdint>
#include <string_view>

#include "disposition.hpp"

namespace idem {

constexpr std::uint64_t max_ttl_s = 365 * 24 * 60 * 60;

enum class ControlProblem : std::uint8_t {
    none,
    unknown_directive,  // not no-store, store or ttl
    unexpected_value,   // store=..., no-store=...
    bad_ttl,            // ttl without a positive integer
    conflicting_ttl,    // two ttls that differ
    ttl_capped,         // above max_ttl_s: max_ttl_s taken
    contradiction,      // store with no-store: the header is ignored
};

struct UpstreamControl {
    StorageAsk storage = StorageAsk::config;
    std::uint64_t ttl_s = 0;       // 0: idempotency_ttl decides
    ControlProblem problem = ControlProblem::none;  // the first one met (a contradiction first)
    std::string_view problem_at;   // the element it was met at (a view into a header value)
    unsigned problems = 0;         // how many were met
};

// For the warning: what a problem means, e.g. "unknown directive".
const char* describe(ControlProblem problem) noexcept;

// Reads the values of the header one by one (add), then says what they
// asked (result). The views it reports point into the values added.
class UpstreamControlParser {
public:
    void add(std::string_view value) noexcept;
    UpstreamControl result() const noexcept;

private:
    void element(std::string_view item) noexcept;
    void note(ControlProblem problem, std::string_view at) noexcept;

    bool store_ = false;
    bool no_store_ = false;
    bool ttl_conflict_ = false;
    std::uint64_t ttl_s_ = 0;
    ControlProblem problem_ = ControlProblem::none;
    std::string_view problem_at_;
    unsigned problems_ = 0;
};

// The whole of one value (one header), for the tests and the simple case.
UpstreamControl parse_upstream_control(std::string_view value) noexcept;

}  // namespace idem
