// body_fingerprint.hpp — the request's fingerprint: by default over its
// method, raw URI and whole body (fingerprint.hpp), else over the parts
// idempotency_fingerprint names (fingerprint_parts.hpp, fingerprint_conf.hpp).
// The body as nginx read it: buffers in memory at once, a body in a
// temporary file a slice per turn of the event loop, so that reading a
// large upload never holds up the worker's other requests. A raw body is
// hashed as it is read; one read as JSON or form fields is gathered in
// r->pool (at most the directive's max_size) and read once it is whole.
// Must not touch: the body itself — it is read, never consumed.
#pragma once

#include "fingerprint.hpp"
#include "json_canonical.hpp"
#include "ngx.hpp"

namespace idem {

struct FingerprintConf;

// Called once the fingerprint is in `out` (ok), could not be made (!ok),
// or the request is not what the parts read it as (ok, `refused` says
// why; the location answers 400 for it).
using FingerprintDone = void (*)(ngx_http_request_t* r, bool ok, BodyFault refused);

// Fingerprints r, whose body has been read (ngx_http_read_client_request_body
// finished), into `out`, which must live as long as the request; `parts`
// nullptr for the default. `done` runs exactly once: before this returns
// when everything was in memory, later from a posted event otherwise,
// never after the request is gone.
void fingerprint_request(ngx_http_request_t* r, const FingerprintConf* parts, Digest& out,
                         FingerprintDone done) noexcept;

}  // namespace idem
