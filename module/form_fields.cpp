// form_fields.cpp — see form_fields.hpp.

#include "form_fields.hpp"

#include "big_endian.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace idem {
namespace {

int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = static_cast<char>(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// %-decodes a form name or value onto out; false on a malformed escape.
bool form_decode(std::string_view in, std::string& out)
{
    for (std::size_t i = 0; i < in.size(); i++) {
        char c = in[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 2 < in.size() ? hex_digit(in[i + 1]) : -1;
            int lo = hi >= 0 ? hex_digit(in[i + 2]) : -1;
            if (lo < 0) {
                return false;
            }
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
        }
        out += c;
    }
    return true;
}

void append_framed(std::string_view bytes, std::string& out)
{
    char length[4];
    put_be(length, static_cast<std::uint32_t>(bytes.size()));
    out.append(length, 4).append(bytes);
}

}  // namespace

BodyFault canonical_form(std::string_view body, std::string& out) noexcept
{
    out.clear();
    try {
        struct Field {
            std::string name, value;
        };
        std::vector<Field> fields;
        while (!body.empty()) {
            std::string_view field = body.substr(0, body.find('&'));
            body.remove_prefix(std::min(body.size(), field.size() + 1));
            if (field.empty()) {
                continue;
            }
            std::size_t eq = field.find('=');
            Field f;
            if (!form_decode(field.substr(0, eq), f.name)
                || (eq != std::string_view::npos && !form_decode(field.substr(eq + 1), f.value))) {
                return BodyFault::not_form;
            }
            fields.push_back(std::move(f));
        }
        std::stable_sort(fields.begin(), fields.end(), [](const Field& a, const Field& b) { return a.name < b.name; });
        for (const Field& f : fields) {
            append_framed(f.name, out);
            append_framed(f.value, out);
        }
        return BodyFault::none;
    } catch (...) {
        out.clear();
        return BodyFault::too_large;
    }
}

}  // namespace idem
