// sse.cpp — see sse.hpp. One pass over the lines, remembering only whether the
// event so far set the last event ID to the one sought.
#include "sse.hpp"

#include <cstdint>

namespace idem {
namespace {

constexpr std::string_view bom = "\xEF\xBB\xBF";
constexpr std::string_view event_stream = "text/event-stream";

char lower(char c) noexcept
{
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool is_space_or_tab(char c) noexcept
{
    return c == ' ' || c == '\t';
}

// If so, moves `expected` past it.
bool take_code_point(std::string_view& expected, std::uint32_t cp) noexcept
{
    char bytes[4];
    std::size_t n = 0;
    if (cp < 0x80) {
        bytes[n++] = static_cast<char>(cp);
    } else if (cp < 0x800) {
        bytes[n++] = static_cast<char>(0xC0 | (cp >> 6));
        bytes[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        bytes[n++] = static_cast<char>(0xE0 | (cp >> 12));
        bytes[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        bytes[n++] = static_cast<char>(0xF0 | (cp >> 18));
        bytes[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | (cp & 0x3F));
    }
    if (expected.substr(0, n) != std::string_view(bytes, n)) {
        return false;
    }
    expected.remove_prefix(n);
    return true;
}

// As the Encoding Standard's UTF-8 decoder (each maximal bad sequence is
// U+FFFD). A line holds whole sequences: a line end is ASCII, which ends any
// sequence it interrupts.
bool decodes_to(std::string_view raw, std::string_view expected) noexcept
{
    constexpr std::uint32_t replacement = 0xFFFD;
    std::uint32_t cp = 0;
    unsigned needed = 0;
    unsigned lower_bound = 0x80;
    unsigned upper_bound = 0xBF;
    for (std::size_t i = 0; i < raw.size();) {
        const unsigned b = static_cast<unsigned char>(raw[i]);
        if (needed == 0) {
            ++i;
            if (b < 0x80) {
                if (!take_code_point(expected, b)) return false;
            } else if (b >= 0xC2 && b <= 0xDF) {
                needed = 1;
                cp = b & 0x1F;
            } else if (b >= 0xE0 && b <= 0xEF) {
                lower_bound = b == 0xE0 ? 0xA0 : 0x80;
                upper_bound = b == 0xED ? 0x9F : 0xBF;
                needed = 2;
                cp = b & 0x0F;
            } else if (b >= 0xF0 && b <= 0xF4) {
                lower_bound = b == 0xF0 ? 0x90 : 0x80;
                upper_bound = b == 0xF4 ? 0x8F : 0xBF;
                needed = 3;
                cp = b & 0x07;
            } else if (!take_code_point(expected, replacement)) {
                return false;
            }
            continue;
        }
        const bool continues = b >= lower_bound && b <= upper_bound;
        lower_bound = 0x80;
        upper_bound = 0xBF;
        if (!continues) {
            // the sequence so far is one U+FFFD; this byte starts afresh
            needed = 0;
            if (!take_code_point(expected, replacement)) return false;
            continue;
        }
        ++i;
        cp = (cp << 6) | (b & 0x3F);
        if (--needed == 0 && !take_code_point(expected, cp)) {
            return false;
        }
    }
    if (needed != 0 && !take_code_point(expected, replacement)) {
        return false;
    }
    return expected.empty();
}

// HTTP does not carry them.
std::string_view trimmed(std::string_view s) noexcept
{
    while (!s.empty() && is_space_or_tab(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && is_space_or_tab(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

}  // namespace

bool is_event_stream(std::string_view content_type) noexcept
{
    std::string_view type = trimmed(content_type.substr(0, content_type.find(';')));
    if (type.size() != event_stream.size()) {
        return false;
    }
    for (std::size_t i = 0; i < type.size(); ++i) {
        if (lower(type[i]) != event_stream[i]) {
            return false;
        }
    }
    return true;
}

std::size_t sse_resume_offset(std::string_view body, std::string_view id) noexcept
{
    id = trimmed(id);
    if (id.empty()) {
        return 0;  // no last event ID: the whole stream
    }
    std::size_t at = body.substr(0, bom.size()) == bom ? bom.size() : 0;
    bool event_matches = false;  // the event so far set the last event ID to `id`
    while (at < body.size()) {
        const std::size_t end = body.find_first_of("\r\n", at);
        if (end == std::string_view::npos) {
            break;  // a line still coming: nothing it holds counts yet
        }
        const std::string_view line = body.substr(at, end - at);
        at = end + 1;
        if (body[end] == '\r' && at < body.size() && body[at] == '\n') {
            ++at;
        }

        if (line.empty()) {
            if (event_matches) {
                return at;
            }
            continue;  // the next event starts; the last event ID stays as it was
        }
        if (line.front() == ':') {
            continue;  // a comment
        }
        const std::size_t colon = line.find(':');
        if (line.substr(0, colon) != "id") {
            continue;  // data, event, retry or a field nobody knows
        }
        std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ') {
            value.remove_prefix(1);
        }
        if (value.find('\0') != std::string_view::npos) {
            continue;  // ignored: the last event ID stays as it was
        }
        value = trimmed(value);
        event_matches = value == id || decodes_to(value, id);
    }
    return 0;
}

}  // namespace idem
