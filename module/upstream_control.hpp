// upstream_control.hpp — parses the upstream's word on its own answer
// (idempotency_upstream_control NAME, read like Cache-Control): store, for
// how long. Pure: capture_headers.cpp takes the header out and hands its
// values here; the verdict is disposition.hpp's. The rules are
// docs/directives.md#idempotency_upstream_control and
// docs/design.md#upstream-control. What cannot be understood is ignored and
// the configuration decides; every problem is counted for one warning.
#pragma once

#include <cstdint>
#include <string_view>

#include "disposition.hpp"

namespace idem {

// A larger ttl is capped: no answer is worth keeping longer, and it is more
// likely milliseconds by mistake.
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

// For the warning, e.g. "unknown directive".
const char* describe(ControlProblem problem) noexcept;

// The views it reports point into the values added.
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

UpstreamControl parse_upstream_control(std::string_view value) noexcept;

}  // namespace idem
