// client_gone.hpp — a claimed request's exchange outlives its client
// (client_gone.cpp).
#pragma once

#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// The client guard's part of the request context, written by
// client_gone.cpp alone: the handlers it wraps.
struct ClientGuard {
    ngx_http_handler_pt content_handler;      // the location's, behind the client-abort protection
    ngx_http_event_handler_pt write_handler;  // the upstream's, behind the client-timeout guard
};

// The location that serves the claimed request now — the one that claimed
// it, or where an internal redirect took it — has its content handler
// protected from client aborts.
void protect_content_handler(RequestCtx* ctx) noexcept;

// In front of the write handler the upstream module installed: a client
// timeout detaches the client instead of ending the exchange.
void guard_client_timeout(RequestCtx* ctx) noexcept;

// When nginx terminates the request (its client timed out or failed after
// the upstream was done), what the filters above the capture still hold is
// captured before the request goes. False when out of memory.
bool drain_when_terminated(RequestCtx* ctx) noexcept;

// The client is gone: what the filters below hold is dropped, and from now
// on the body filter swallows the bytes after capturing them.
void detach(ngx_http_request_t* r, RequestCtx* ctx);
void consume(ngx_chain_t* cl);

}  // namespace idem
