// json_canonical.hpp — a request body read as data, not as bytes, for the
// fingerprint's body part (docs/design.md#what-a-fingerprint-is-made-of):
// JSON in its canonical form (RFC 8785: members sorted by UTF-16 code
// units, numbers as ECMAScript's shortest round-trip doubles, minimal
// string escapes), the whole document, chosen members only or all but
// some (RFC 6901 JSON Pointers); form fields in form_fields.hpp. A body
// that cannot be read so is refused with its fault, never read some other
// way here.
// Parsing is simdjson's (docs/performance.md#the-json-library); its memory
// is the heap, released before each call returns. Pure: knows nothing of
// nginx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace idem {

// Why a body is not what the fingerprint reads.
enum class BodyFault : std::uint8_t {
    none,
    not_json,          // not one JSON text, or not UTF-8
    duplicate_member,  // an object names a member twice (not I-JSON, RFC 7493)
    too_deep,          // values nested deeper than the bound
    too_large,         // more bytes than the bound for reading them
    not_form,          // a form field with a malformed %-escape
};

std::string_view body_fault_name(BodyFault fault) noexcept;
// The sentence a 400 problem document says of it.
std::string_view body_fault_detail(BodyFault fault) noexcept;

// Which members of the document make its canonical form.
enum class JsonPick : std::uint8_t {
    whole,   // every member
    only,    // the members the pointers name, as the object {pointer: value}; absent ones left out
    except,  // every member but those the pointers name
};

struct JsonSelection {
    JsonPick pick = JsonPick::whole;
    const std::string_view* pointers = nullptr;  // RFC 6901, each valid (json_pointer_valid)
    std::size_t count = 0;
    unsigned max_depth = 32;                     // how deep values nest: the body is 1, {"a":1}'s 1 is 2
};

// RFC 6901: "" (the whole document) or "/" tokens with "~0" and "~1" the
// only escapes.
bool json_pointer_valid(std::string_view pointer) noexcept;

// What the parser may read past a body's end: a caller that has that many
// readable bytes after it says `padded`, and spares a copy.
constexpr std::size_t json_padding = 64;

// The canonical form of `body` as `selection` reads it into out (cleared
// first). On a fault out is left empty.
BodyFault canonical_json(std::string_view body, bool padded, const JsonSelection& selection, std::string& out) noexcept;

// RFC 8785's pieces, for anything else that writes canonical JSON.
void write_json_number(double value, std::string& out);
void write_json_string(std::string_view utf8, std::string& out);
bool utf16_less(std::string_view a, std::string_view b) noexcept;

}  // namespace idem
