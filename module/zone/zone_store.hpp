// zone/zone_store.hpp — the Store in nginx shared memory, for a single
// gateway without Redis (its directives: zone_conf.hpp). The zone holds the
// same record bytes as Redis would, indexed by store key and by expiry, in
// nginx's slab allocator under the zone's own mutex; a record that does not
// fit is never made room for by evicting a live one.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::zone {

// A zone of the module's (size 0: a reference to one defined elsewhere).
ngx_shm_zone_t* add_zone(ngx_conf_t* cf, ngx_str_t& name, size_t size) noexcept;
// The store over a zone just defined, set up when nginx maps the zone.
bool make_store(ngx_conf_t* cf, ngx_shm_zone_t* shm) noexcept;

// Whether the zone idempotency_store named was defined by idempotency_zone.
bool defined(const ngx_shm_zone_t* zone) noexcept;

// The store over `zone`, shared by the locations that select it; nullptr
// until nginx has mapped the zone.
Store* attached_store(ngx_shm_zone_t* zone) noexcept;

}  // namespace idem::zone
