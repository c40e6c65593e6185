// fence.hpp — what the configuration may hand the upstream about a claim
// (docs/design.md#the-fence): $idempotency_key_hash, the store key's hash
// of the virtual server, scope and key (the same key, never the raw one),
// and $idempotency_fence, a number the store draws with each claim of a
// key and that grows from one claim of it to the next, so an upstream can
// turn away a stale execution after a lost claim. Reads the claim's part
// of the request context; writes nothing.
#pragma once

#include "ngx.hpp"

namespace idem {

ngx_int_t fence_add_variables(ngx_conf_t* cf) noexcept;

// Whether the configuration names $idempotency_fence anywhere (then, and
// only then, claims draw a fence). Valid once the http block is parsed
// (in merge).
bool fence_named(ngx_conf_t* cf) noexcept;

}  // namespace idem
