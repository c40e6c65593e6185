// zone/zone_conf.hpp — the handlers of idempotency_zone zone=NAME:SIZE
// (http: a zone shared by all workers, kept across reloads) and
// idempotency_store zone=NAME | redis (which store a location uses).
#pragma once

#include "../conf.hpp"

namespace idem::zone {

char* set_zone(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);   // idempotency_zone
char* set_store(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);  // idempotency_store

}  // namespace idem::zone
