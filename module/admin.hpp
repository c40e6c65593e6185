// admin.hpp — the operator's endpoint (admin.cpp): `idempotency_admin`
// makes a location inspect and purge store keys.
#pragma once

#include "ngx.hpp"

namespace idem {

struct LocConf;

char* set_admin_handler(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// At a location's merge: the operator's endpoint is never a protected
// request. `idempotency on` inherited from an enclosing block gives way to
// it; written beside it in the same location, nginx -t refuses the two.
// `enabled_here`: `idempotency` was set in this location. False on error.
bool merge_admin(ngx_conf_t* cf, LocConf* conf, bool enabled_here);

}  // namespace idem
