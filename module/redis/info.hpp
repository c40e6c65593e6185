// redis/info.hpp — reading Redis's INFO text: the value of one field,
// whether the eviction policy it names can drop the module's keys, and
// which conditional writes the server runs. Pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::redis {

// The value of `field` in an INFO reply ("field:value" lines, "\r\n" or
// "\n" ended, "# Section" headers); empty when it is not there.
std::string_view info_field(std::string_view info, std::string_view field) noexcept;

// Every key the module writes has a TTL, so every maxmemory-policy but
// noeviction (the volatile-* ones included) may evict a live claim or a
// stored response.
inline bool evicts_module_keys(std::string_view policy) noexcept
{
    return !policy.empty() && policy != "noeviction";
}

// The conditional writes a server runs, learned from its INFO server
// (docs/design.md#conditional-writes): `SET key value IFEQ old` (Valkey
// 8.1, Redis 8.4) and a delete of a key only while it holds a value:
// `DELIFEQ key value` (Valkey 9.0) or `DELEX key IFEQ value` (Redis 8.4).
enum class ConditionalDelete : std::uint8_t { none, delifeq, delex_ifeq };

struct ServerFeatures {
    bool known = false;     // INFO server read (until then, and when refused: none)
    bool set_ifeq = false;  // SET ... IFEQ
    ConditionalDelete del = ConditionalDelete::none;
};

// From an INFO server reply: Valkey says `server_name:valkey` and its
// version in `valkey_version` (its `redis_version` stays 7.2.4, for
// clients that check it); Redis only `redis_version`. A version that does
// not read as major.minor has none of them.
ServerFeatures server_features(std::string_view info_server) noexcept;

}  // namespace idem::redis
