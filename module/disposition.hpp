// disposition.hpp — what becomes of a claimed request's response: stored,
// released so a retry runs again, or kept as unreplayable (410) because an
// upstream may have executed it but the answer cannot stand for it. Pure:
// capture.cpp gathers the facts. See docs/design.md#not-executed,
// docs/design.md#unreplayable and docs/design.md#upstream-control.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace idem {

// Such an answer is not stored, like a 5xx. Only 400-499: 5xx are
// idempotency_store_errors'.
class ReleaseStatuses {
public:
    static constexpr unsigned first = 400;
    static constexpr unsigned last = 499;

    constexpr ReleaseStatuses() noexcept = default;
    static constexpr ReleaseStatuses of(std::initializer_list<unsigned> statuses) noexcept
    {
        ReleaseStatuses set;
        for (unsigned s : statuses) {
            set.add(s);
        }
        return set;
    }
    // False, nothing added, outside first..last.
    constexpr bool add(unsigned status) noexcept
    {
        if (status < first || status > last) {
            return false;
        }
        bits_[(status - first) / 64] |= std::uint64_t{1} << ((status - first) % 64);
        return true;
    }
    constexpr bool contains(unsigned status) const noexcept
    {
        return status >= first && status <= last && (bits_[(status - first) / 64] >> ((status - first) % 64) & 1) != 0;
    }

private:
    std::uint64_t bits_[2] = {0, 0};
};

// Three digits, 400-499; 0 for anything else.
unsigned parse_release_status(std::string_view arg) noexcept;

// Every peer nginx tried, in every location the request passed through.
// `silent`, `answered` and `failed` leave out the attempt whose answer is the
// response itself.
struct UpstreamFacts {
    bool attempted = false;  // some upstream peer was tried
    bool reached = false;    // some attempt may have delivered the request
    bool silent = false;     // an attempt that may have delivered it got no answer
    bool answered = false;   // an upstream answered it below 500
    bool failed = false;     // an upstream answered it with a 5xx
    bool declined = false;   // an upstream answered that it did not execute it (429, ...)
};

// idempotency_upstream_control: config means the configuration decides.
enum class StorageAsk : std::uint8_t { config, store, no_store };

struct ResponseFacts {
    unsigned status = 0;
    bool from_upstream = false;  // the response is an upstream's own answer
    bool store_errors = false;   // idempotency_store_errors
    ReleaseStatuses release;     // idempotency_release_statuses
    UpstreamFacts upstream;
    StorageAsk asked = StorageAsk::config;  // heeded for an upstream's own answer only
};

enum class Disposition { store, release, unreplayable };

struct Verdict {
    Disposition disposition;
    const char* why;  // for the log; nullptr when stored
};

Verdict judge_response(const ResponseFacts& facts) noexcept;

// Released only if no upstream may have received it and no response had begun.
Verdict judge_unfinished(const UpstreamFacts& upstream, bool response_started) noexcept;

}  // namespace idem
