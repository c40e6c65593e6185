// zone/zone_rules.cpp — see zone_rules.hpp.

#include "zone_rules.hpp"

#include "../record.hpp"

namespace idem::zone {

Fence fence_complete(std::optional<std::string_view> current, std::string_view claim,
                     std::string_view record) noexcept
{
    if (current == claim) {
        return Fence::act;
    }
    return current == record ? Fence::done : Fence::refused;
}

Fence fence_release(std::optional<std::string_view> current, std::string_view claim) noexcept
{
    if (!current) {
        return Fence::done;
    }
    return *current == claim ? Fence::act : Fence::refused;
}

Fence fence_renew(std::optional<std::string_view> current, std::string_view claim) noexcept
{
    return current == claim ? Fence::act : Fence::refused;
}

std::size_t full_zone_marker(std::string_view claim, std::string_view record, char* out) noexcept
{
    std::optional<Record> held = decode_record(claim);
    if (!held || held->kind != RecordKind::claim) {
        return 0;
    }
    std::optional<Record> response = decode_record(record);
    std::uint16_t status = response ? response->status : 0;
    return encode_unreplayable(held->fingerprint, status, out);
}

}  // namespace idem::zone
