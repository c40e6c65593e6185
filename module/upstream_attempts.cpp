// upstream_attempts.cpp — see upstream_attempts.hpp.

#include "upstream_attempts.hpp"

namespace idem {

// r->upstream_states: one entry per peer tried, kept across internal
// redirects, a separator (no peer) between upstreams. `answering` nullptr:
// nginx answers.
UpstreamFacts upstream_facts(ngx_http_request_t* r, const ngx_http_upstream_state_t* answering,
                             const ReleaseStatuses& declining) noexcept
{
    UpstreamFacts facts;
    if (r->upstream_states == nullptr) {
        return facts;
    }
    ngx_http_upstream_t* u = r->upstream;
    auto* states = static_cast<const ngx_http_upstream_state_t*>(r->upstream_states->elts);
    for (ngx_uint_t i = 0; i < r->upstream_states->nelts; i++) {
        const ngx_http_upstream_state_t& s = states[i];
        if (s.peer == nullptr) {
            continue;
        }
        facts.attempted = true;
        // bytes_sent is filled in when an attempt ends; the current one
        // tells by request_sent (set once writing the request began)
        bool current = u != nullptr && u->state == &s;
        if (s.bytes_sent == 0 && !(current && u->request_sent)) {
            continue;
        }
        facts.reached = true;
        if (&s == answering) {
            continue;
        }
        if (s.header_time == static_cast<ngx_msec_t>(-1)) {
            facts.silent = true;
        } else if (s.status >= NGX_HTTP_INTERNAL_SERVER_ERROR) {
            facts.failed = true;
        } else if (declining.contains(s.status)) {
            facts.declined = true;  // proxy_next_upstream http_429, or an intercepted 429
        } else {
            facts.answered = true;
        }
    }
    return facts;
}

// The upstream's own answer is going out (not nginx's error for it, nor an
// error_page or X-Accel-Redirect answer after it closed).
bool upstream_answers(ngx_http_request_t* r) noexcept
{
    ngx_http_upstream_t* u = r->upstream;
    return u != nullptr && u->headers_in.status_n != 0 && (u->peer.connection != nullptr || r->cached);
}

}  // namespace idem
