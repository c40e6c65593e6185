// metrics.cpp — see metrics.hpp.

#include "metrics.hpp"

#include <ctime>

#include "conf.hpp"
#include "module_zone.hpp"
#include "outcome.hpp"
#include "send.hpp"

namespace idem {
namespace {

// Bucket upper bounds, in microseconds and milliseconds; +Inf is implicit.
constexpr std::uint64_t rtt_bounds_us[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000};
constexpr std::uint64_t wait_bounds_ms[] = {10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};
constexpr size_t rtt_buckets = sizeof(rtt_bounds_us) / sizeof(rtt_bounds_us[0]) + 1;
constexpr size_t wait_buckets = sizeof(wait_bounds_ms) / sizeof(wait_bounds_ms[0]) + 1;

struct Shared {
    ngx_atomic_t outcomes[outcome_count];
    ngx_atomic_t counters[static_cast<unsigned>(Counter::count_)];
    ngx_atomic_t rtt[rtt_buckets];
    ngx_atomic_t rtt_sum_us;
    ngx_atomic_t wait[wait_buckets];
    ngx_atomic_t wait_sum_ms;
};

// The counters served as one series each.
struct SimpleCounter {
    Counter counter;
    const char* name;
    const char* help;
};

constexpr SimpleCounter simple_counters[] = {
    {Counter::redis_commands, "idempotency_redis_commands_total", "Commands sent to Redis."},
    {Counter::redis_errors, "idempotency_redis_errors_total", "Error replies from Redis."},
    {Counter::redis_timeouts, "idempotency_redis_timeouts_total", "Claims and connections that timed out waiting for Redis."},
    {Counter::redis_reconnects, "idempotency_redis_reconnects_total", "Connections to Redis made again after a failure."},
    {Counter::redis_tls_failures, "idempotency_redis_tls_failures_total",
     "TLS handshakes with Redis, or checks of its certificate, that failed."},
    {Counter::live_logs_given_up, "idempotency_live_logs_given_up_total",
     "Live logs given up because an append failed: their followers in other workers or gateways were cut off."},
    {Counter::wait_timeouts, "idempotency_wait_timeouts_total",
     "Duplicates whose idempotency_wait ran out with the original still in flight: answered 409."},
    {Counter::oom_markers, "idempotency_redis_oom_markers_total",
     "Responses Redis refused for memory that the worker could not hold (idempotency_redis_oom_buffer): the "
     "unreplayable marker is stored in their place, and their retries get 410."},
    {Counter::stored_responses, "idempotency_stored_responses_total", "Records handed to the store for storing (responses and markers)."},
    {Counter::stored_bytes, "idempotency_stored_bytes_total", "Bytes of the records handed to the store for storing."},
    {Counter::compressed_records, "idempotency_compressed_records_total",
     "Response records handed to the store compressed (idempotency_compress)."},
    {Counter::compression_saved_bytes, "idempotency_compression_saved_bytes_total",
     "Bytes compression took off the response records handed to the store."},
};

constexpr std::string_view zone_name = "idempotency_metrics";
Shared* shared;           // this worker's view of the zone

void add(ngx_atomic_t& slot, std::uint64_t n) noexcept
{
    ngx_atomic_fetch_add(&slot, static_cast<ngx_atomic_int_t>(n));
}

template <size_t N>
size_t bucket(const std::uint64_t (&bounds)[N], std::uint64_t value) noexcept
{
    size_t i = 0;
    while (i < N && value > bounds[i]) {
        i++;
    }
    return i;
}

// ------------------------------------------------------------ the page

struct Text {
    u_char* p;
    u_char* end;
};

template <class... A>
void put(Text& t, const char* fmt, A... args)
{
    t.p = ngx_slprintf(t.p, t.end, fmt, args...);
}

void put_seconds(Text& t, std::uint64_t micro)
{
    put(t, "%uL.%06uL", micro / 1000000, micro % 1000000);
}

template <size_t N>
void put_histogram(Text& t, const char* name, const char* help, const std::uint64_t (&bounds)[N],
                   const ngx_atomic_t* counts, std::uint64_t sum_us, std::uint64_t unit_us)
{
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    std::uint64_t cumulative = 0;
    for (size_t i = 0; i <= N; i++) {
        cumulative += counts[i];
        if (i < N) {
            put(t, "%s_bucket{le=\"", name);
            put_seconds(t, bounds[i] * unit_us);
            put(t, "\"} %uL\n", cumulative);
        } else {
            put(t, "%s_bucket{le=\"+Inf\"} %uL\n", name, cumulative);
        }
    }
    put(t, "%s_sum ", name);
    put_seconds(t, sum_us);
    put(t, "\n%s_count %uL\n", name, cumulative);
}

void put_counter(Text& t, const char* name, const char* help, std::uint64_t value)
{
    put(t, "# HELP %s %s\n# TYPE %s counter\n%s %uL\n", name, help, name, name, value);
}

MetricsSection section = nullptr;

ngx_int_t metrics_handler(ngx_http_request_t* r)
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (shared == nullptr) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    constexpr size_t page_size = 8192;
    auto* page = static_cast<u_char*>(ngx_pnalloc(r->pool, page_size));
    if (page == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    Text t{page, page + page_size};

    put(t, "# HELP idempotency_requests_total Requests the module acted on, by outcome ($idempotency_status).\n"
           "# TYPE idempotency_requests_total counter\n");
    for (unsigned i = 1; i < outcome_count; i++) {
        const OutcomeInfo& outcome = outcome_info(static_cast<Outcome>(i));
        if (outcome.counted_as != static_cast<Outcome>(i)) {
            continue;  // added to the series it is counted as
        }
        ngx_str_t s{outcome.name.size(), bytes(outcome.name)};
        put(t, "idempotency_requests_total{outcome=\"%V\"} %uA\n", &s, shared->outcomes[i]);
    }
    const ngx_atomic_t* c = shared->counters;
    for (const SimpleCounter& sc : simple_counters) {
        put_counter(t, sc.name, sc.help, c[static_cast<unsigned>(sc.counter)]);
    }
    put(t, "# HELP idempotency_redis_abandoned_total Responses not stored and keys not released on Redis: given up "
           "after retrying transient errors and lost connections, or left by an exiting worker.\n"
           "# TYPE idempotency_redis_abandoned_total counter\n"
           "idempotency_redis_abandoned_total{operation=\"store\"} %uA\n"
           "idempotency_redis_abandoned_total{operation=\"release\"} %uA\n",
        c[static_cast<unsigned>(Counter::abandoned_stores)], c[static_cast<unsigned>(Counter::abandoned_releases)]);
    put(t, "# HELP idempotency_redis_stores_out_of_memory_total Responses Redis refused for memory (OOM): each "
           "keeps its claim for idempotency_ttl while the store is tried again until Redis takes writes.\n"
           "# TYPE idempotency_redis_stores_out_of_memory_total counter\n"
           "idempotency_redis_stores_out_of_memory_total %uA\n",
        c[static_cast<unsigned>(Counter::stores_kept_for_memory)]);
    put(t, "# HELP idempotency_zone_full_total Zone store operations refused for lack of room in the zone.\n"
           "# TYPE idempotency_zone_full_total counter\n"
           "idempotency_zone_full_total{operation=\"claim\"} %uA\n"
           "idempotency_zone_full_total{operation=\"store\"} %uA\n"
           "idempotency_zone_full_total{operation=\"live\"} %uA\n",
        c[static_cast<unsigned>(Counter::zone_full_claims)], c[static_cast<unsigned>(Counter::zone_full_stores)],
        c[static_cast<unsigned>(Counter::zone_full_live)]);
    put_histogram(t, "idempotency_redis_rtt_seconds", "Round-trip time of Redis commands.", rtt_bounds_us,
                  shared->rtt, shared->rtt_sum_us, 1);
    put_histogram(t, "idempotency_wait_seconds", "Time duplicates spent waiting for the original (idempotency_wait).",
                  wait_bounds_ms, shared->wait, shared->wait_sum_ms * 1000, 1000);
    if (section != nullptr) {
        t.p = section(t.p, t.end);
    }

    r->headers_out.status = NGX_HTTP_OK;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = sizeof("text/plain") - 1;
    return send_whole_body(r, {reinterpret_cast<char*>(page), static_cast<size_t>(t.p - page)});
}

}  // namespace

void count(Counter c, std::uint64_t n) noexcept
{
    if (shared != nullptr) {
        add(shared->counters[static_cast<unsigned>(c)], n);
    }
}

void count_outcome(Outcome outcome) noexcept
{
    auto series = static_cast<unsigned>(outcome_info(outcome).counted_as);
    if (shared != nullptr && series > 0) {
        add(shared->outcomes[series], 1);
    }
}

void observe_redis_rtt(std::uint64_t microseconds) noexcept
{
    if (shared != nullptr) {
        add(shared->rtt[bucket(rtt_bounds_us, microseconds)], 1);
        add(shared->rtt_sum_us, microseconds);
    }
}

void observe_wait(ngx_msec_t milliseconds) noexcept
{
    if (shared != nullptr) {
        add(shared->wait[bucket(wait_bounds_ms, milliseconds)], 1);
        add(shared->wait_sum_ms, milliseconds);
    }
}

std::uint64_t monotonic_us() noexcept
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

void metrics_add_section(MetricsSection write) noexcept
{
    section = write;
}

ngx_int_t metrics_zone_add(ngx_conf_t* cf) noexcept
{
    return add_module_zone(cf, zone_name, 8 * ngx_pagesize, sizeof(Shared));
}

void metrics_attach(ngx_cycle_t* cycle) noexcept
{
    shared = static_cast<Shared*>(module_zone_block(cycle, zone_name));
}

char* set_metrics_handler(ngx_conf_t* cf, ngx_command_t*, void*)
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = metrics_handler;
    return NGX_CONF_OK;
}

}  // namespace idem
