// fingerprint_parts.hpp — the fingerprint made of the parts an operator
// chose (idempotency_fingerprint, docs/design.md#what-a-fingerprint-is-made-of):
// a version tag and the list's own description, then each part as its tag,
// its length (8 bytes, big-endian) and its bytes, so that two different
// lists, or two requests whose parts split differently, never give one
// input; and none starts as the default fingerprint's input (a method,
// never a NUL byte). Pure: knows nothing of nginx.
#pragma once

#include <cstdint>
#include <string_view>

#include "fingerprint.hpp"

namespace idem {

enum class Part : std::uint8_t {
    method = 1,
    uri,          // the raw request URI, path and query
    path,         // the raw path, without the query
    args,         // the raw query string
    args_set,     // the query's fields as a set (canonical_form)
    variable,     // a string with nginx variables, evaluated
    body,         // the raw body bytes
    body_json,    // the canonical JSON (canonical_json), whole or all but some members
    json_only,    // chosen members of it
    body_form,    // form fields as a set (canonical_form)
    body_unread,  // the raw body, standing in for a form it could not be read as (unreadable=raw)
    args_unread,  // the raw query, likewise for args=set
};

// Starts the input: the version tag, then the description of the list.
void begin_parts(Sha256& sha, std::string_view description) noexcept;
// One part, whole.
void add_part(Sha256& sha, Part part, std::string_view value) noexcept;
// One part of `length` bytes, which the caller then feeds to sha itself.
void begin_part(Sha256& sha, Part part, std::uint64_t length) noexcept;

}  // namespace idem
