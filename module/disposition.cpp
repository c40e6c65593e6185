// disposition.cpp — see disposition.hpp. One rule: never execute twice
// silently. A key is released only when no upstream can have received the
// request, every one that did failed (5xx) or declined it, or the answering
// upstream asked no-store.

#include "disposition.hpp"

namespace idem {
namespace {

// Made at compile time, so a verdict's reason names the status and stays static.
struct StatusReasons {
    static constexpr unsigned count = ReleaseStatuses::last - ReleaseStatuses::first + 1;
    char text[count][80];

    const char* operator[](unsigned status) const noexcept
    {
        return status >= ReleaseStatuses::first && status <= ReleaseStatuses::last ? text[status - ReleaseStatuses::first]
                                                                                   : "";
    }
};

constexpr StatusReasons make_reasons(const char* head, const char* tail)
{
    StatusReasons reasons{};
    for (unsigned i = 0; i < StatusReasons::count; i++) {
        char* out = reasons.text[i];
        unsigned n = 0;
        for (const char* p = head; *p != '\0'; p++) {
            out[n++] = *p;
        }
        unsigned status = ReleaseStatuses::first + i;
        out[n++] = static_cast<char>('0' + status / 100);
        out[n++] = static_cast<char>('0' + status / 10 % 10);
        out[n++] = static_cast<char>('0' + status % 10);
        for (const char* p = tail; *p != '\0'; p++) {
            out[n++] = *p;
        }
        out[n] = '\0';
    }
    return reasons;
}

constexpr StatusReasons upstream_not_executed = make_reasons("the upstream answered ", ": not executed");
constexpr StatusReasons upstream_not_executed_after_peer =
    make_reasons("the upstream answered ", " after another peer may have executed it");
constexpr StatusReasons location_not_executed = make_reasons("the location answered ", ": not executed");

}  // namespace

unsigned parse_release_status(std::string_view arg) noexcept
{
    if (arg.size() != 3) {
        return 0;
    }
    unsigned status = 0;
    for (char c : arg) {
        if (c < '0' || c > '9') {
            return 0;
        }
        status = status * 10 + static_cast<unsigned>(c - '0');
    }
    return status >= ReleaseStatuses::first && status <= ReleaseStatuses::last ? status : 0;
}

Verdict judge_response(const ResponseFacts& f) noexcept
{
    const UpstreamFacts& u = f.upstream;
    const bool error = f.status >= 500;
    const bool not_executed = f.release.contains(f.status);

    if (u.attempted && !u.reached) {
        // every peer refused or none was live: whatever answers now (nginx's
        // 502, an error_page fallback) is not the key's response
        return {Disposition::release, "the request never reached the upstream"};
    }
    if (f.from_upstream) {
        if (f.asked == StorageAsk::no_store) {
            // the upstream speaks for its own answer, not for an earlier
            // peer that may have executed the request
            if (u.silent || u.answered) {
                return {Disposition::unreplayable,
                        "the upstream asked not to store its answer after another peer may have executed it"};
            }
            return {Disposition::release, "the upstream asked not to store its answer (no-store)"};
        }
        if (f.asked == StorageAsk::store) {
            return {Disposition::store, nullptr};
        }
        if (not_executed) {
            // the upstream says it did not execute the request (429, 408,
            // ...); an earlier peer that went silent or answered may have
            if (u.silent || u.answered) {
                return {Disposition::unreplayable, upstream_not_executed_after_peer[f.status]};
            }
            return {Disposition::release, upstream_not_executed[f.status]};
        }
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
        if (not_executed) {
            return {Disposition::unreplayable, "the upstream answered but nginx's answer says it was not executed"};
        }
        return {Disposition::store, nullptr};
    }
    if (not_executed) {
        return {Disposition::release, location_not_executed[f.status]};
    }
    if (u.declined) {
        return {Disposition::release, "the upstream answered that it did not execute it"};
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
