// fence.hpp — what the configuration may hand the upstream about a claim:
// $idempotency_key_hash (never the raw key) and $idempotency_fence, growing
// from one claim of a key to the next so an upstream can turn away a stale
// execution. Reads the claim's part of the context; writes nothing.
// See docs/design.md#the-fence.
#pragma once

#include "ngx.hpp"

namespace idem {

ngx_int_t fence_add_variables(ngx_conf_t* cf) noexcept;

// Only then do claims draw a fence. Valid once the http block is parsed.
bool fence_named(ngx_conf_t* cf) noexcept;

}  // namespace idem
