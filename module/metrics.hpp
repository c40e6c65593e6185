// metrics.hpp — what the module counts, in a shared zone kept across reloads
// ("idempotency_metrics"), served in Prometheus text by `idempotency_metrics;`.
#pragma once

#include <cstdint>

#include "ngx.hpp"
#include "outcome.hpp"

namespace idem {

enum class Counter : unsigned {
    redis_commands, redis_errors, redis_timeouts, redis_reconnects, stored_responses, stored_bytes,
    zone_full_claims, zone_full_stores, zone_full_live,  // the shared memory zone store had no room
    abandoned_stores, abandoned_releases,  // owed to Redis, given up after retrying or at worker exit
    stores_kept_for_memory,  // responses Redis refused for memory (OOM), their claims kept for idempotency_ttl
    oom_markers,  // ... of which the worker held only the marker (idempotency_redis_oom_buffer full)
    redis_tls_failures,  // TLS handshakes or certificate checks that failed
    live_logs_given_up,  // live logs whose appends failed (feed_publish.cpp)
    wait_timeouts,  // duplicates whose idempotency_wait ran out with the original in flight (wait.cpp)
    compressed_records, compression_saved_bytes,  // records kept compressed, and the bytes that saved (compression.hpp)
    count_,
};

// Each is a no-op until the worker has attached to the zone.
void count(Counter c, std::uint64_t n = 1) noexcept;
void count_outcome(Outcome outcome) noexcept;
void observe_redis_rtt(std::uint64_t microseconds) noexcept;
void observe_wait(ngx_msec_t milliseconds) noexcept;

std::uint64_t monotonic_us() noexcept;

// What the page shows of a store a floor above this one: `write` puts its
// lines into [p, end) and returns where they end (registered at start-up).
using MetricsSection = u_char* (*)(u_char* p, u_char* end);
void metrics_add_section(MetricsSection write) noexcept;

ngx_int_t metrics_zone_add(ngx_conf_t* cf) noexcept;   // postconfiguration
void metrics_attach(ngx_cycle_t* cycle) noexcept;       // init_process
char* set_metrics_handler(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem
