// admin_key.hpp — the store key a request to the operator's endpoint
// (admin.cpp) names, read from its query arguments: a key's hash
// (?hash=), or the key a request would send, with its scope (?scope=) and
// virtual server (?server=) named as nginx would name them.
// Must not touch: the store (admin.cpp peeks and purges).
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

struct LocConf;

// A query argument, unescaped; false when it is absent.
bool query_arg(ngx_http_request_t* r, const char* name, ngx_str_t& out);
// "1", "true" or "yes", any case.
bool is_yes(const ngx_str_t& s);

// The store key from ?hash= (64 hex digits).
bool key_from_hash(ngx_http_request_t* r, const LocConf* conf, const ngx_str_t& hash, ngx_str_t& key);
// The store key as a request with this key would name it: the virtual
// server (this one, or ?server=NAME), the scope (?scope=), the key.
bool key_from_header(ngx_http_request_t* r, const LocConf* conf, std::string_view client_key, ngx_str_t& key);

}  // namespace idem
