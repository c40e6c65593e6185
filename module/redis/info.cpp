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

}  // namespace idem::redis
