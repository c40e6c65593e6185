// fingerprint_conf.hpp — idempotency_fingerprint: the parts a location's
// fingerprint is made of (docs/directives.md#idempotency_fingerprint,
// docs/design.md#what-a-fingerprint-is-made-of), parsed and checked at
// configuration time; body_fingerprint.cpp reads them per request.
// Must not touch: the request — this is configuration only.
#pragma once

#include <string_view>

#include "fingerprint_parts.hpp"
#include "json_canonical.hpp"
#include "ngx.hpp"

namespace idem {

// One part besides the body, in the order the directive names them.
struct FingerprintPart {
    Part part;                         // method, uri, path, args, args_set, variable
    ngx_http_complex_value_t* value;   // Part::variable: the string with variables
};

struct FingerprintConf {
    FingerprintPart* parts;
    ngx_uint_t nparts;
    Part body;                         // body, body_json, json_only, body_form; Part{0}: the body is no part
    JsonSelection json;                // body_json (whole, or except=) and json_only (json=): the pointers
    size_t max_size;                   // max_size=: the largest body read as JSON or form fields
    bool unreadable_raw;               // unreadable=raw: such a body stands as its raw bytes; else 400
    ngx_str_t description;             // the parts and options as written: hashed first, so lists never collide
};

// The directive; sets LocConf::fingerprint, nullptr for the default's
// parts (method uri body), whose digest stays the default's.
char* set_fingerprint(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem
