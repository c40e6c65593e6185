// json_canonical.cpp — see json_canonical.hpp. simdjson parses (its DOM,
// UTF-8 validated, nesting bounded by the parser); the canonical form is
// written here: simdjson keeps members in the order the body has them,
// names twice if the body does, and numbers as parsed.

#include "json_canonical.hpp"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

namespace idem {
namespace {

using namespace simdjson;

static_assert(json_padding >= SIMDJSON_PADDING, "json_padding covers what simdjson reads past the end");

// Integers a double holds exactly are written as the double; larger ones
// keep their digits (docs/design.md#what-a-fingerprint-is-made-of).
constexpr std::uint64_t exact_in_double = std::uint64_t{1} << 53;

template <typename Int>
void write_integer(Int v, bool exact, std::string& out)
{
    if (exact) {
        write_json_number(static_cast<double>(v), out);
        return;
    }
    char digits[24];
    out.append(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);
}

// A pointer's reference token for a member name: '~' and '/' escaped.
void append_token(std::string& path, std::string_view name)
{
    path += '/';
    for (char c : name) {
        if (c == '~' || c == '/') {
            path.append(c == '~' ? "~0" : "~1");
        } else {
            path += c;
        }
    }
}

// Writes the canonical form of a document, or reports a member named twice.
class Writer {
public:
    Writer(std::string& out, const std::string_view* skip, std::size_t skip_count)
        : out_(out), skip_(skip), skip_end_(skip + skip_count)
    {
    }

    bool write(dom::element v)
    {
        switch (v.type()) {
        case dom::element_type::ARRAY:
            return write_array(dom::array(v));
        case dom::element_type::OBJECT:
            return write_object(dom::object(v));
        case dom::element_type::INT64: {
            std::int64_t i = v.get_int64().value_unsafe();
            auto bound = static_cast<std::int64_t>(exact_in_double);
            write_integer(i, i >= -bound && i <= bound, out_);
            return true;
        }
        case dom::element_type::UINT64: {
            std::uint64_t u = v.get_uint64().value_unsafe();
            write_integer(u, u <= exact_in_double, out_);
            return true;
        }
        case dom::element_type::DOUBLE:
            write_json_number(v.get_double().value_unsafe(), out_);
            return true;
        case dom::element_type::STRING:
            write_json_string(v.get_string().value_unsafe(), out_);
            return true;
        case dom::element_type::BOOL:
            out_ += v.get_bool().value_unsafe() ? "true" : "false";
            return true;
        case dom::element_type::NULL_VALUE:
            out_ += "null";
            return true;
        }
        return false;
    }

private:
    // With pointers to leave out, the path of what is being written.
    bool skipped(std::size_t path_length)
    {
        bool skip = std::find(skip_, skip_end_, std::string_view(path_).substr(0, path_length)) != skip_end_;
        return skip;
    }

    bool write_array(dom::array array)
    {
        out_ += '[';
        std::size_t at = path_.size(), index = 0;
        const char* comma = "";
        for (dom::element e : array) {
            if (skip_ != skip_end_) {
                path_.resize(at);
                path_.append("/").append(std::to_string(index++));
                if (skipped(path_.size())) {
                    continue;
                }
            }
            out_ += comma;
            comma = ",";
            if (!write(e)) {
                return false;
            }
        }
        path_.resize(at);
        out_ += ']';
        return true;
    }

    bool write_object(dom::object object)
    {
        // RFC 8785 orders members by their names' UTF-16 code units; equal
        // names end up side by side
        std::vector<dom::key_value_pair> members;
        members.reserve(object.size());
        for (dom::key_value_pair m : object) {
            members.push_back(m);
        }
        std::sort(members.begin(), members.end(),
                  [](const dom::key_value_pair& a, const dom::key_value_pair& b) { return utf16_less(a.key, b.key); });
        out_ += '{';
        std::size_t at = path_.size();
        const char* comma = "";
        for (std::size_t i = 0; i < members.size(); i++) {
            if (i > 0 && members[i].key == members[i - 1].key) {
                return false;
            }
            if (skip_ != skip_end_) {
                path_.resize(at);
                append_token(path_, members[i].key);
                if (skipped(path_.size())) {
                    continue;
                }
            }
            out_ += comma;
            comma = ",";
            write_json_string(members[i].key, out_);
            out_ += ':';
            if (!write(members[i].value)) {
                return false;
            }
        }
        path_.resize(at);
        out_ += '}';
        return true;
    }

    std::string& out_;
    const std::string_view* skip_;
    const std::string_view* skip_end_;
    std::string path_;
};

// Whether any object of the document names a member twice, without
// writing it (for chosen members, which read only part of it).
bool unique_members(dom::element v, std::vector<std::string_view>& names)
{
    if (v.is_array()) {
        for (dom::element e : dom::array(v)) {
            if (!unique_members(e, names)) {
                return false;
            }
        }
        return true;
    }
    if (!v.is_object()) {
        return true;
    }
    dom::object object(v);
    std::size_t first = names.size();
    for (dom::key_value_pair m : object) {
        names.push_back(m.key);
    }
    std::sort(names.begin() + static_cast<std::ptrdiff_t>(first), names.end());
    bool unique = std::adjacent_find(names.begin() + static_cast<std::ptrdiff_t>(first), names.end()) == names.end();
    names.resize(first);
    if (!unique) {
        return false;
    }
    for (dom::key_value_pair m : object) {
        if (!unique_members(m.value, names)) {
            return false;
        }
    }
    return true;
}

BodyFault write_selection(dom::element root, const JsonSelection& selection, std::string& out)
{
    const std::string_view* first = selection.pointers;
    const std::string_view* last = first + selection.count;
    if (selection.pick != JsonPick::only) {
        Writer writer(out, selection.pick == JsonPick::except ? first : nullptr,
                      selection.pick == JsonPick::except ? selection.count : 0);
        return writer.write(root) ? BodyFault::none : BodyFault::duplicate_member;
    }
    std::vector<std::string_view> names;
    if (!unique_members(root, names)) {
        return BodyFault::duplicate_member;
    }
    std::vector<std::string_view> chosen(first, last);
    std::sort(chosen.begin(), chosen.end(), utf16_less);
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    out += '{';
    const char* comma = "";
    Writer writer(out, nullptr, 0);
    for (std::string_view p : chosen) {
        dom::element v;
        if (root.at_pointer(p).get(v) != SUCCESS) {
            continue;  // absent
        }
        out += comma;
        comma = ",";
        write_json_string(p, out);
        out += ':';
        writer.write(v);
    }
    out += '}';
    return BodyFault::none;
}

BodyFault fault_of(error_code error)
{
    switch (error) {
    case DEPTH_ERROR: return BodyFault::too_deep;
    case CAPACITY:
    case MEMALLOC: return BodyFault::too_large;
    default: return BodyFault::not_json;
    }
}

}  // namespace

std::string_view body_fault_name(BodyFault fault) noexcept
{
    switch (fault) {
    case BodyFault::none: return "none";
    case BodyFault::not_json: return "not JSON";
    case BodyFault::duplicate_member: return "a JSON member named twice";
    case BodyFault::too_deep: return "JSON nested too deep";
    case BodyFault::too_large: return "too large to read";
    case BodyFault::not_form: return "not form fields";
    }
    return "unknown";
}

std::string_view body_fault_detail(BodyFault fault) noexcept
{
    switch (fault) {
    case BodyFault::not_json:
        return "This endpoint tells retries apart by the JSON content of the request body, and the body is not one "
               "JSON text in UTF-8 within the numbers a double holds.";
    case BodyFault::duplicate_member:
        return "This endpoint tells retries apart by the JSON content of the request body, and the body names a "
               "member twice in one object (not I-JSON, RFC 7493), which reads two ways.";
    case BodyFault::too_deep:
        return "This endpoint tells retries apart by the JSON content of the request body, and the body nests "
               "arrays and objects deeper than the endpoint reads.";
    case BodyFault::too_large:
        return "This endpoint tells retries apart by the content of the request body, and the body is larger than "
               "the endpoint reads so.";
    case BodyFault::not_form:
        return "This endpoint tells retries apart by the form fields of the request, and a field has a malformed "
               "%-escape.";
    case BodyFault::none:
        break;
    }
    return "This endpoint tells retries apart by the content of the request body, and this body cannot be read so.";
}

bool json_pointer_valid(std::string_view pointer) noexcept
{
    if (!pointer.empty() && pointer[0] != '/') {
        return false;
    }
    for (std::size_t i = 0; i < pointer.size(); i++) {
        if (pointer[i] == '~' && (i + 1 == pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1'))) {
            return false;
        }
    }
    return true;
}

BodyFault canonical_json(std::string_view body, bool padded, const JsonSelection& selection, std::string& out) noexcept
{
    out.clear();
    try {
        dom::parser parser;
        dom::element root;
        error_code error = parser.allocate(body.size(), selection.max_depth);
        if (error == SUCCESS) {
            error = parser.parse(body.data(), body.size(), !padded).get(root);
        }
        if (error != SUCCESS) {
            return fault_of(error);
        }
        out.reserve(body.size());
        BodyFault fault = write_selection(root, selection, out);
        if (fault != BodyFault::none) {
            out.clear();
        }
        return fault;
    } catch (...) {
        // std::bad_alloc: never a partial form
        out.clear();
        return BodyFault::too_large;
    }
}

// ECMAScript's Number::toString (ECMA-262 §6.1.6.1.20) over the shortest
// digits that read back as the same double (std::to_chars).
void write_json_number(double value, std::string& out)
{
    if (value == 0) {
        out += '0';  // and -0
        return;
    }
    if (std::fabs(value) < static_cast<double>(exact_in_double) && value == static_cast<double>(static_cast<std::int64_t>(value))) {
        char whole[24];  // an integer: its digits are the shortest
        out.append(whole, std::to_chars(whole, whole + sizeof whole, static_cast<std::int64_t>(value)).ptr);
        return;
    }
    char sci[32];
    auto end = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific).ptr;
    std::string_view s(sci, static_cast<std::size_t>(end - sci));
    if (s[0] == '-') {
        out += '-';
        s.remove_prefix(1);
    }
    std::size_t e = s.find('e');
    char digit_buf[32];
    std::size_t k_digits = 0;
    for (char c : s.substr(0, e)) {
        if (c != '.') {
            digit_buf[k_digits++] = c;
        }
    }
    const std::string_view digits(digit_buf, k_digits);
    int exponent = 0;
    std::from_chars(s.data() + e + (s[e + 1] == '+' ? 2 : 1), s.data() + s.size(), exponent);
    const int k = static_cast<int>(digits.size());
    const int n = exponent + 1;  // where the decimal point goes
    if (k <= n && n <= 21) {
        out.append(digits).append(static_cast<std::size_t>(n - k), '0');
    } else if (0 < n && n <= 21) {
        out.append(digits, 0, static_cast<std::size_t>(n)).append(".").append(digits, static_cast<std::size_t>(n));
    } else if (-6 < n && n <= 0) {
        out.append("0.").append(static_cast<std::size_t>(-n), '0').append(digits);
    } else {
        out += digits[0];
        if (k > 1) {
            out.append(".").append(digits, 1);
        }
        out.append(n - 1 < 0 ? "e-" : "e+").append(std::to_string(n - 1 < 0 ? 1 - n : n - 1));
    }
}

void write_json_string(std::string_view utf8, std::string& out)
{
    static constexpr char hex[] = "0123456789abcdef";
    out += '"';
    std::size_t plain = 0;  // the start of the bytes written as they are
    for (std::size_t i = 0; i < utf8.size(); i++) {
        auto c = static_cast<unsigned char>(utf8[i]);
        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        out.append(utf8.data() + plain, i - plain);
        plain = i + 1;
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default: {
            const char escape[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
            out.append(escape, sizeof escape);
        }
        }
    }
    out.append(utf8.data() + plain, utf8.size() - plain);
    out += '"';
}

// UTF-8's byte order is code point order; UTF-16's differs only between a
// code point of U+E000..U+FFFF (lead byte 0xEE, 0xEF) and one above
// U+FFFF (lead byte 0xF0..0xF4), whose surrogates sort first. At the first
// byte that differs both strings are at the same place of a character.
bool utf16_less(std::string_view a, std::string_view b) noexcept
{
    std::size_t n = std::min(a.size(), b.size());
    std::size_t i = 0;
    while (i < n && a[i] == b[i]) {
        i++;
    }
    if (i == n) {
        return a.size() < b.size();
    }
    auto x = static_cast<unsigned char>(a[i]);
    auto y = static_cast<unsigned char>(b[i]);
    bool x_bmp_high = x == 0xEE || x == 0xEF, y_bmp_high = y == 0xEE || y == 0xEF;
    if ((x_bmp_high && y >= 0xF0) || (y_bmp_high && x >= 0xF0)) {
        return x >= 0xF0;
    }
    return x < y;
}

}  // namespace idem
