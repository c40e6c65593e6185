// redis/info.hpp — reading Redis's INFO text. Pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::redis {

// "field:value" lines, "\r\n" or "\n" ended; empty when it is not there.
std::string_view info_field(std::string_view info, std::string_view field) noexcept;

// Every module key has a TTL, so every policy but noeviction (volatile-*
// included) may evict a live claim or a stored response.
inline bool evicts_module_keys(std::string_view policy) noexcept
{
    return !policy.empty() && policy != "noeviction";
}

// docs/design.md#conditional-writes: `SET key value IFEQ old` (Valkey 8.1,
// Redis 8.4); `DELIFEQ key value` (Valkey 9.0) or `DELEX key IFEQ value`
// (Redis 8.4).
enum class ConditionalDelete : std::uint8_t { none, delifeq, delex_ifeq };

struct ServerFeatures {
    bool known = false;     // INFO server read (until then, and when refused: none)
    bool set_ifeq = false;  // SET ... IFEQ
    ConditionalDelete del = ConditionalDelete::none;
};

// Valkey's version is `valkey_version` (its `redis_version` stays 7.2.4 for
// clients that check it). A version not read as major.minor has none.
ServerFeatures server_features(std::string_view info_server) noexcept;

}  // namespace idem::redis
