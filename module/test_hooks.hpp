// test_hooks.hpp — what only a test build has (test_hooks.cpp): compiled in
// with -DIDEM_TEST_HOOKS alone, which the ASan build passes
// (scripts/asan-build.sh) and no other build does. A release knows none of it.
#pragma once

#ifdef IDEM_TEST_HOOKS

#include "ngx.hpp"

namespace idem {

// `idempotency_test_store_raw` (a location, no arguments): raw bytes under
// any key of the location's store, for scripts/fuzz-gateway.pl.
char* set_test_store_raw(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem

#endif
