// redis/info.hpp — reading Redis's INFO text: the value of one field, and
// whether the eviction policy it names can drop the module's keys. Pure.
#pragma once

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

}  // namespace idem::redis
