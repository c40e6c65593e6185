// admin_key.hpp — the store key an operator's request names in its query: a
// key's hash, or a client key with its scope and virtual server, named as
// nginx would. Must not touch the store. See docs/design.md#inspect-and-purge.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

struct LocConf;

// Unescaped; false when absent.
bool query_arg(ngx_http_request_t* r, const char* name, ngx_str_t& out);
// "1", "true" or "yes", any case.
bool is_yes(const ngx_str_t& s);

// ?hash=: 64 hex digits.
bool key_from_hash(ngx_http_request_t* r, const LocConf* conf, const ngx_str_t& hash, ngx_str_t& key);
// The virtual server (this one, or ?server=NAME), the scope (?scope=), the key.
bool key_from_header(ngx_http_request_t* r, const LocConf* conf, std::string_view client_key, ngx_str_t& key);

}  // namespace idem
