// key_space.hpp — the part of every store key the configuration decides.
// See docs/design.md#scopes-apart.
#pragma once

#include <string_view>

#include "conf.hpp"

namespace idem {

// "N:" + name, in `pool`. False when out of memory.
bool key_space_of(ngx_pool_t* pool, const ngx_str_t& name, ngx_str_t& space);

// The prefix, then the hash of the three (key.hpp), in `pool`. False when out
// of memory or the hash fails.
bool store_key(ngx_pool_t* pool, const ngx_str_t& prefix, const ngx_str_t& space, const ngx_str_t& scope,
               std::string_view key, ngx_str_t& out);

// Warns, naming the location, when callers share one key space (no
// idempotency_scope), or a second server block without server_name protects
// requests. False when out of memory.
bool merge_key_space(ngx_conf_t* cf, LocConf* conf);

}  // namespace idem
