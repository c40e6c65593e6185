// zone/zone_store.hpp — the Store in nginx shared memory, for a single
// gateway without Redis. `idempotency_zone zone=NAME:SIZE` (http) defines a
// zone shared by all workers and kept across reloads; `idempotency_store
// zone=NAME | redis` selects the store of a location. The zone holds the
// same record bytes as Redis would, indexed by store key and by expiry, in
// nginx's slab allocator under the zone's own mutex; a record that does not
// fit is never made room for by evicting a live one.
#pragma once

#include "../conf.hpp"

namespace idem::zone {

char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // idempotency_zone
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);  // idempotency_store

// Whether the zone idempotency_store named was defined by idempotency_zone.
bool defined(const ngx_shm_zone_t* zone) noexcept;

// The store over `zone`, shared by the locations that select it.
Store* store_for(ngx_shm_zone_t* zone) noexcept;

}  // namespace idem::zone
