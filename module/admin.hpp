// admin.hpp — idempotency_admin. See docs/design.md#inspect-and-purge.
#pragma once

#include "ngx.hpp"

namespace idem {

struct LocConf;

char* set_admin_handler(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// The endpoint is never a protected request: an inherited `idempotency on`
// gives way; one set in the same location (`enabled_here`) is refused by
// nginx -t. False on error.
bool merge_admin(ngx_conf_t* cf, LocConf* conf, bool enabled_here);

}  // namespace idem
