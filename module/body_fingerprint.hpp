// body_fingerprint.hpp — the request's fingerprint (fingerprint.hpp) over
// its method, raw URI and whole body as nginx read it: buffers in memory at
// once, a body in a temporary file a slice per turn of the event loop, so
// that hashing a large upload never holds up the worker's other requests.
// Must not touch: the body itself — it is read, never consumed.
#pragma once

#include "fingerprint.hpp"
#include "ngx.hpp"

namespace idem {

// Called once the fingerprint is in `out` (ok) or could not be made.
using FingerprintDone = void (*)(ngx_http_request_t* r, bool ok);

// Fingerprints r, whose body has been read (ngx_http_read_client_request_body
// finished), into `out`, which must live as long as the request. `done` runs
// exactly once: before this returns when everything was in memory, later
// from a posted event otherwise, never after the request is gone.
void fingerprint_request(ngx_http_request_t* r, Digest& out, FingerprintDone done) noexcept;

}  // namespace idem
