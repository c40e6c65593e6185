// key_space.hpp — the part of every store key that the configuration
// decides: the virtual server, and what nginx -t says about a key space
// that callers or server blocks share (key_space.cpp).
#pragma once

#include <string_view>

#include "conf.hpp"

namespace idem {

// The key space of the virtual server whose first server_name is `name`:
// "N:" + name, in `pool`. False when out of memory.
bool key_space_of(ngx_pool_t* pool, const ngx_str_t& name, ngx_str_t& space);

// The store key of a client's `key` in `space` under `scope`: the prefix,
// then the hash of the three (key.hpp's derive_redis_key), in `pool`.
// False when out of memory or the hash fails.
bool store_key(ngx_pool_t* pool, const ngx_str_t& prefix, const ngx_str_t& space, const ngx_str_t& scope,
               std::string_view key, ngx_str_t& out);

// At a location's merge: sets conf->key_space from its server block and
// warns, naming the location, when its callers share one key space (no
// idempotency_scope), or when a second server block without server_name
// protects requests. False when out of memory.
bool merge_key_space(ngx_conf_t* cf, LocConf* conf);

}  // namespace idem
