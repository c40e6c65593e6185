// zone/zone_conf.hpp — idempotency_zone and idempotency_store, and the zone's
// store, set up when nginx maps the zone. See docs/design.md#the-zone-across-reloads.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::zone {

char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // idempotency_zone
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);  // idempotency_store

// size 0: a reference to one defined elsewhere.
ngx_shm_zone_t* add_zone(ngx_conf_t* cf, ngx_str_t& name, size_t size) noexcept;
// Set up when nginx maps the zone.
bool make_store(ngx_conf_t* cf, ngx_shm_zone_t* shm) noexcept;

// Run in the master. False, with an [emerg] naming the zone, when a reload
// would drop one holding claims or stored responses (resized, gone,
// renamed): nginx would start it empty and their retries execute again.
bool keeps_records(ngx_conf_t* cf) noexcept;

// The metrics page's lines for the zones: each one's size and the bytes of
// the pages its slab allocator has free (a MetricsSection).
u_char* write_usage(u_char* p, u_char* end) noexcept;

bool defined(const ngx_shm_zone_t* zone) noexcept;

// nullptr until nginx has mapped the zone.
Store* attached_store(ngx_shm_zone_t* zone) noexcept;

}  // namespace idem::zone
