// zone/zone_conf.hpp — the handlers of idempotency_zone zone=NAME:SIZE
// (http: a zone shared by all workers, kept across reloads) and
// idempotency_store zone=NAME | redis (which store a location uses); the
// zone's store (zone_store.hpp), made with its zone and set up when nginx
// maps it.
#pragma once

#include "../conf.hpp"
#include "../store.hpp"

namespace idem::zone {

char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // idempotency_zone
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);  // idempotency_store

// A zone of the module's (size 0: a reference to one defined elsewhere).
ngx_shm_zone_t* add_zone(ngx_conf_t* cf, ngx_str_t& name, size_t size) noexcept;
// The store over a zone just defined, set up when nginx maps the zone.
bool make_store(ngx_conf_t* cf, ngx_shm_zone_t* shm) noexcept;

// A reload (run in the master) that would drop a running zone holding
// claims or stored responses — its size changed, or it is gone or renamed —
// is refused with an [emerg] naming the zone: nginx would start the new
// zone empty and those keys' retries would execute again. False then.
bool keeps_records(ngx_conf_t* cf) noexcept;

// Whether the zone idempotency_store named was defined by idempotency_zone.
bool defined(const ngx_shm_zone_t* zone) noexcept;

// The store over `zone`, shared by the locations that select it; nullptr
// until nginx has mapped the zone.
Store* attached_store(ngx_shm_zone_t* zone) noexcept;

}  // namespace idem::zone
