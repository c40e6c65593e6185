// test_hooks.hpp — test builds only (-DIDEM_TEST_HOOKS, passed by the ASan
// build alone); a release knows none of it.
#pragma once

#ifdef IDEM_TEST_HOOKS

#include "ngx.hpp"

namespace idem {

// For scripts/fuzz-gateway.pl.
char* set_test_store_raw(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem

#endif
