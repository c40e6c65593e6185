// log_limit.hpp — per-request lines about an outage at most once a second per
// worker, with the count they stand for: an outage must not flood the log.
#pragma once

#include "ngx.hpp"

namespace idem {

struct LogLimiter {
    ngx_msec_t last = 0;
    ngx_uint_t count = 0;

    // `count` then reports this occurrence and the ones not written.
    bool admit()
    {
        count++;
        if (last != 0 && ngx_current_msec - last < 1000) {
            return false;
        }
        last = ngx_current_msec;
        return true;
    }
    ngx_uint_t take() { ngx_uint_t n = count; count = 0; return n; }
};

}  // namespace idem
