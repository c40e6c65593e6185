// form_fields.hpp — form fields (application/x-www-form-urlencoded, or a
// query string) read as a set, for the fingerprint's body=form and
// args=set parts (docs/design.md#what-a-fingerprint-is-made-of). Pure:
// knows nothing of nginx.
#pragma once

#include <string>
#include <string_view>

#include "json_canonical.hpp"

namespace idem {

// Form fields: each name=value %-decoded ('+' a space), ordered by name
// (fields of one name keep their order), each name and value length-
// prefixed into out (cleared first). Empty fields ("a&&b") are skipped; a
// field without '=' has an empty value. BodyFault::not_form for a
// malformed %-escape.
BodyFault canonical_form(std::string_view body, std::string& out) noexcept;

}  // namespace idem
