// admin.hpp — the operator's endpoint (admin.cpp): `idempotency_admin`
// makes a location inspect and purge store keys.
#pragma once

#include "ngx.hpp"

namespace idem {

char* set_admin_handler(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem
