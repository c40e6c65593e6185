// redis/retry.cpp — see retry.hpp.

#include "retry.hpp"

#include <algorithm>

namespace idem::redis {
namespace {

constexpr std::string_view transient_codes[] = {
    "LOADING",      // the server is loading its dataset (a restart, a full sync)
    "BUSY",         // a script or module command runs past busy-reply-threshold
    "OOM",          // maxmemory reached with noeviction
    "MISCONF",      // the last background save failed: writes are stopped
    "READONLY",     // a replica now (a failover, REPLICAOF)
    "MASTERDOWN",   // a replica that lost its master and serves no stale data
    "NOREPLICAS",   // min-replicas-to-write not met
    "CLUSTERDOWN",  // the cluster cannot serve the slot now
    "TRYAGAIN",     // a slot being migrated
};

bool is_code(std::string_view word) noexcept
{
    return std::find(std::begin(transient_codes), std::end(transient_codes), word) != std::end(transient_codes);
}

std::string_view first_word(std::string_view text) noexcept
{
    return text.substr(0, text.find_first_of(" \r\n"));
}

// The transient code `error` reports, as it is or wrapped by a script;
// empty when none.
std::string_view transient_code(std::string_view error) noexcept
{
    if (is_code(first_word(error))) {
        return first_word(error);
    }
    // "ERR Error running script (call to f_<sha1>): @user_script:1:
    // @user_script: 1: -OOM command not allowed ..."
    constexpr std::string_view wrapped = "ERR Error running script";
    if (error.substr(0, wrapped.size()) != wrapped) {
        return {};
    }
    for (std::size_t at = error.find(": "); at != std::string_view::npos; at = error.find(": ", at + 2)) {
        std::string_view rest = error.substr(at + 2);
        if (!rest.empty() && rest[0] == '-') {
            rest.remove_prefix(1);
        }
        if (is_code(first_word(rest))) {
            return first_word(rest);
        }
    }
    return {};
}

}  // namespace

bool is_transient_error(std::string_view error) noexcept
{
    return !transient_code(error).empty();
}

bool is_out_of_memory(std::string_view error) noexcept
{
    return transient_code(error) == "OOM";
}

std::uint64_t retry_window_ms(std::uint64_t lock_ttl_ms, bool keeps_claim) noexcept
{
    return keeps_claim ? std::max(lock_ttl_ms, store_retry_floor_ms) : lock_ttl_ms;
}

std::uint64_t renewing_max_delay_ms(std::uint64_t lock_ttl_ms) noexcept
{
    return std::max<std::uint64_t>(lock_ttl_ms / 3, 1);
}

void Retry::count_failure(std::uint64_t now) noexcept
{
    if (failures++ == 0) {
        started = now;
    }
}

bool Retry::next(std::uint64_t now, std::uint64_t window, std::uint64_t max_delay, std::uint64_t& wait) noexcept
{
    bool first = failures == 0;
    count_failure(now);
    if (first) {
        deadline = now + window;
    }
    delay = retry_backoff.after(first ? 0 : delay);
    if (now >= deadline) {
        return false;
    }
    wait = std::min({delay, std::max<std::uint64_t>(max_delay, 1), deadline - now});
    return true;
}

}  // namespace idem::redis
