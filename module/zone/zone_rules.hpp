// zone/zone_rules.hpp — the shared-memory store's rules apart from shared
// memory: expiry, the fenced operations (the Lua scripts' counterparts),
// and the marker for a full zone. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace idem::zone {

// On one monotonic clock, in ms.
constexpr bool expired(std::uint64_t expires, std::uint64_t now) noexcept
{
    return expires <= now;
}

// `current` nullopt: none, or expired. Only the claim's holder acts; work
// already done is `done`; anything else (expired, taken over) `refused`.
enum class Fence { act, done, refused };

Fence fence_complete(std::optional<std::string_view> current, std::string_view claim,
                     std::string_view record) noexcept;
Fence fence_release(std::optional<std::string_view> current, std::string_view claim) noexcept;
Fence fence_renew(std::optional<std::string_view> current, std::string_view claim) noexcept;

// The claim's fingerprint and the status (0 when the record is sealed).
// `out` has room for unreplayable_size; 0 when `claim` is not a claim.
std::size_t full_zone_marker(std::string_view claim, std::string_view record, char* out) noexcept;

}  // namespace idem::zone
