// key_space.hpp — the part of every store key that the configuration
// decides: the virtual server, and what nginx -t says about a key space
// that callers or server blocks share (key_space.cpp).
#pragma once

#include "conf.hpp"

namespace idem {

// At a location's merge: sets conf->key_space from its server block and
// warns, naming the location, when its callers share one key space (no
// idempotency_scope), or when a second server block without server_name
// protects requests. False when out of memory.
bool merge_key_space(ngx_conf_t* cf, LocConf* conf);

}  // namespace idem
