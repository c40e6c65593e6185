// fuzz_canonical.cpp — libFuzzer target: the canonical forms a fingerprint
// reads a body as (json_canonical.hpp, form_fields.hpp) on arbitrary bytes.
// The first byte picks the reading; the rest is the body, and for chosen
// or left-out members the pointers are taken from its first line.
// Checked: no crash or sanitizer report; a canonical form is a fixed point
// (read again, it is itself, but for the integers simdjson does not read:
// docs/design.md#what-a-fingerprint-is-made-of) and the same whether the body came with room
// past its end or not; a refusal leaves nothing; chosen members always make
// an object; numbers read back as the same double; the member order agrees
// with a plain UTF-16 comparison.
//
//   make fuzz                 (all targets; see the Makefile)
//   build/fuzz/fuzz_canonical -max_len=4096 build/fuzz/corpus/fuzz_canonical
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "form_fields.hpp"
#include "fuzz_common.hpp"
#include "json_canonical.hpp"

namespace {

using idem::BodyFault;
using idem::JsonPick;

// The body with room past its end, as the module hands it over.
BodyFault canonical_padded(std::string_view body, const idem::JsonSelection& selection, std::string& out)
{
    std::string room(body);
    room.append(idem::json_padding, '\0');
    return idem::canonical_json(std::string_view(room).substr(0, body.size()), true, selection, out);
}

// Whether a run of 20 or more digits is in the text.
bool has_long_integer(std::string_view text)
{
    std::size_t run = 0;
    for (char c : text) {
        run = c >= '0' && c <= '9' ? run + 1 : 0;
        if (run >= 20) {
            return true;
        }
    }
    return false;
}

void check_json(std::string_view body, JsonPick pick, const std::vector<std::string_view>& pointers)
{
    idem::JsonSelection selection{pick, pointers.data(), pointers.size(), 32};
    std::string out, padded;
    const BodyFault fault = idem::canonical_json(body, false, selection, out);
    FUZZ_CHECK(canonical_padded(body, selection, padded) == fault);
    FUZZ_CHECK(padded == out);
    if (fault != BodyFault::none) {
        FUZZ_CHECK(out.empty());
        return;
    }
    FUZZ_CHECK(!out.empty());
    if (pick == JsonPick::only) {
        FUZZ_CHECK(out.front() == '{' && out.back() == '}');
    }
    // the canonical form is canonical JSON: read again as a whole, itself;
    // but a double of 1e20 or more below 1e21 is written as an integer of
    // 21 digits (ECMAScript), which simdjson 3.0 does not read back
    std::string again;
    const idem::JsonSelection whole{JsonPick::whole, nullptr, 0, 256};
    const BodyFault reread = idem::canonical_json(out, false, whole, again);
    FUZZ_CHECK(reread == BodyFault::none || (reread == BodyFault::not_json && has_long_integer(out)));
    FUZZ_CHECK(reread != BodyFault::none || again == out);
}

// UTF-8 to UTF-16 code units, for valid UTF-8 only (false otherwise).
bool utf16(std::string_view s, std::vector<std::uint16_t>& units)
{
    for (std::size_t i = 0; i < s.size();) {
        auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || i + n > s.size()) {
            return false;
        }
        std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (std::size_t k = 1; k < n; k++) {
            auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (d & 0x3F);
        }
        const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        if (cp >= 0x10000) {
            units.push_back(static_cast<std::uint16_t>(0xD800 + ((cp - 0x10000) >> 10)));
            units.push_back(static_cast<std::uint16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF)));
        } else {
            units.push_back(static_cast<std::uint16_t>(cp));
        }
        i += n;
    }
    return true;
}

void check_order(std::string_view data)
{
    const std::size_t half = data.size() / 2;
    const std::string_view a = data.substr(0, half), b = data.substr(half);
    std::vector<std::uint16_t> ua, ub;
    if (!utf16(a, ua) || !utf16(b, ub)) {
        return;
    }
    FUZZ_CHECK(idem::utf16_less(a, b) == (ua < ub));
    FUZZ_CHECK(!idem::utf16_less(a, a));
}

void check_number(std::string_view data)
{
    if (data.size() < sizeof(double)) {
        return;
    }
    double value;
    std::memcpy(&value, data.data(), sizeof value);
    if (!std::isfinite(value)) {
        return;
    }
    std::string written;
    idem::write_json_number(value, written);
    const double back = std::strtod(written.c_str(), nullptr);
    FUZZ_CHECK(back == value);
    FUZZ_CHECK(written.find_first_not_of("0123456789.e+-") == std::string::npos);
}

void check_form(std::string_view body)
{
    std::string out, again;
    const BodyFault fault = idem::canonical_form(body, out);
    FUZZ_CHECK(fault == BodyFault::none || fault == BodyFault::not_form);
    FUZZ_CHECK(fault == BodyFault::none || out.empty());
    FUZZ_CHECK(idem::canonical_form(body, again) == fault && again == out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 6) {
    case 0:
        check_json(rest, JsonPick::whole, {});
        break;
    case 1:
    case 2: {
        // the first line: pointers, space-separated; then the body
        const std::size_t eol = rest.find('\n');
        const std::string_view line = rest.substr(0, eol == std::string_view::npos ? 0 : eol);
        const std::string_view body = eol == std::string_view::npos ? rest : rest.substr(eol + 1);
        std::vector<std::string_view> pointers;
        for (std::size_t at = 0; at <= line.size();) {
            std::size_t end = std::min(line.find(' ', at), line.size());
            std::string_view p = line.substr(at, end - at);
            if (idem::json_pointer_valid(p) && (data[0] % 6 == 1 || !p.empty())) {
                pointers.push_back(p);
            }
            at = end + 1;
        }
        check_json(body, data[0] % 6 == 1 ? JsonPick::only : JsonPick::except, pointers);
        break;
    }
    case 3:
        check_form(rest);
        break;
    case 4:
        check_number(rest);
        break;
    default:
        check_order(rest);
        break;
    }
    return 0;
}
