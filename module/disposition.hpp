// disposition.hpp — what becomes of a claimed request's response: stored
// for replay, the key released so that a retry runs again, or the key kept
// as unreplayable (410) because an upstream may have executed the request
// but the answer the client got cannot stand for it (SPEC rules 8 and 9,
// "The request is followed"). Pure: capture.cpp gathers the facts from
// nginx's record of the upstream attempts.
#pragma once

namespace idem {

// What the request's upstream attempts tell: every peer nginx tried
// (proxy_next_upstream), in every location the request passed through
// (error_page, X-Accel-Redirect). `silent`, `answered` and `failed` leave
// out the attempt whose answer is the response itself.
struct UpstreamFacts {
    bool attempted = false;  // some upstream peer was tried
    bool reached = false;    // some attempt may have delivered the request
    bool silent = false;     // an attempt that may have delivered it got no answer
    bool answered = false;   // an upstream answered it below 500
    bool failed = false;     // an upstream answered it with a 5xx
};

struct ResponseFacts {
    unsigned status = 0;
    bool from_upstream = false;  // the response is an upstream's own answer
    bool store_errors = false;   // idempotency_store_errors
    UpstreamFacts upstream;
};

enum class Disposition { store, release, unreplayable };

struct Verdict {
    Disposition disposition;
    const char* why;  // for the log; nullptr when stored
};

Verdict judge_response(const ResponseFacts& facts) noexcept;

// A request that ended while its claim was still held: released only if no
// upstream may have received it and no response had begun.
Verdict judge_unfinished(const UpstreamFacts& upstream, bool response_started) noexcept;

}  // namespace idem
