// zone/zone_rules.hpp — the rules of the shared-memory store, apart from
// shared memory: when a record has expired, what a fenced operation does
// given the record under its key (the counterparts of the Redis store's Lua
// scripts), and the marker that replaces a claim whose response finds the
// zone full. Pure: knows nothing of nginx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace idem::zone {

// A record expires at `expires` (milliseconds on one monotonic clock).
constexpr bool expired(std::uint64_t expires, std::uint64_t now) noexcept
{
    return expires <= now;
}

// What a fenced operation does with the live record `current` under its key
// (nullopt when there is none, or it has expired): only the holder of the
// claim record acts; an operation whose work is already done is `done`;
// anything else — the claim expired or was taken over — is `refused`.
enum class Fence { act, done, refused };

Fence fence_complete(std::optional<std::string_view> current, std::string_view claim,
                     std::string_view record) noexcept;
Fence fence_release(std::optional<std::string_view> current, std::string_view claim) noexcept;
Fence fence_renew(std::optional<std::string_view> current, std::string_view claim) noexcept;

// The unreplayable marker kept instead of a response the zone has no room
// for: the claim's fingerprint and the response's status (0 when the record
// is sealed). Writes it to `out` (room for unreplayable_size); returns its
// size, or 0 when `claim` is not a claim record.
std::size_t full_zone_marker(std::string_view claim, std::string_view record, char* out) noexcept;

}  // namespace idem::zone
