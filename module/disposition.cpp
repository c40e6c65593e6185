// disposition.cpp — see disposition.hpp. One rule throughout: never execute
// twice silently. A key is released only when no upstream can have received
// the request, or when every upstream that did said it failed (5xx).

#include "disposition.hpp"

namespace idem {

Verdict judge_response(const ResponseFacts& f) noexcept
{
    const UpstreamFacts& u = f.upstream;
    const bool error = f.status >= 500;

    if (u.attempted && !u.reached) {
        // every peer refused or none was live: whatever answers now (nginx's
        // 502, an error_page fallback) is not the key's response
        return {Disposition::release, "the request never reached the upstream"};
    }
    if (f.from_upstream) {
        if (!error || f.store_errors) {
            return {Disposition::store, nullptr};
        }
        if (u.silent || u.answered) {
            return {Disposition::unreplayable, "the upstream answered 5xx after another peer may have executed it"};
        }
        return {Disposition::release, "the upstream answered 5xx"};
    }
    // nginx answers: its own error, an error_page fallback, or the location
    // an upstream handed over to (X-Accel-Redirect, an intercepted error)
    if (u.silent) {
        return {Disposition::unreplayable, "the upstream got the request but nginx answered it"};
    }
    if (u.answered) {
        if (error) {
            return {Disposition::unreplayable, "the upstream answered but nginx's answer is an error"};
        }
        return {Disposition::store, nullptr};
    }
    if ((u.failed || error) && !f.store_errors) {
        return {Disposition::release, u.failed ? "the upstream answered 5xx" : "the location answered 5xx"};
    }
    return {Disposition::store, nullptr};
}

Verdict judge_unfinished(const UpstreamFacts& u, bool response_started) noexcept
{
    if (response_started || u.reached) {
        return {Disposition::unreplayable, "the response did not complete"};
    }
    return {Disposition::release, "the request ended before a response"};
}

}  // namespace idem
