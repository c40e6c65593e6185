// redis/info.cpp — see info.hpp.

#include "redis/info.hpp"

namespace idem::redis {

std::string_view info_field(std::string_view info, std::string_view field) noexcept
{
    while (!info.empty()) {
        std::size_t end = info.find('\n');
        std::string_view line = info.substr(0, end);
        info = end == std::string_view::npos ? std::string_view{} : info.substr(end + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.size() > field.size() && line.substr(0, field.size()) == field && line[field.size()] == ':') {
            return line.substr(field.size() + 1);
        }
    }
    return {};
}

namespace {

// "major.minor[.patch...]" as major * 1000 + minor; -1 when it is not one.
long version_number(std::string_view v) noexcept
{
    long part[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        std::size_t digits = 0;
        while (digits < v.size() && digits < 6 && v[digits] >= '0' && v[digits] <= '9') {
            part[i] = part[i] * 10 + (v[digits] - '0');
            digits++;
        }
        if (digits == 0 || (digits < v.size() && v[digits] >= '0' && v[digits] <= '9')) {
            return -1;
        }
        v.remove_prefix(digits);
        if (i == 0) {
            if (v.empty() || v.front() != '.') {
                return -1;
            }
            v.remove_prefix(1);
        }
    }
    if (part[1] >= 1000) {
        return -1;
    }
    return part[0] * 1000 + part[1];
}

}  // namespace

ServerFeatures server_features(std::string_view info) noexcept
{
    ServerFeatures f;
    f.known = true;
    if (info_field(info, "server_name") == "valkey") {
        long v = version_number(info_field(info, "valkey_version"));
        f.set_ifeq = v >= 8001;
        f.del = v >= 9000 ? ConditionalDelete::delifeq : ConditionalDelete::none;
        return f;
    }
    if (!info_field(info, "server_name").empty()) {
        return f;  // another server that speaks Redis: none assumed
    }
    long v = version_number(info_field(info, "redis_version"));
    f.set_ifeq = v >= 8004;
    f.del = v >= 8004 ? ConditionalDelete::delex_ifeq : ConditionalDelete::none;
    return f;
}

}  // namespace idem::redis
