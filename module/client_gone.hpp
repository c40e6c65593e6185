// client_gone.hpp — a claimed request's exchange outlives its client.
#pragma once

#include "ngx.hpp"

namespace idem {

struct RequestCtx;

// Written by client_gone.cpp alone.
struct ClientGuard {
    ngx_http_handler_pt content_handler;      // the location's, behind the client-abort protection
    ngx_http_event_handler_pt write_handler;  // the upstream's, behind the client-timeout guard
};

// The location serving it now, also after an internal redirect.
void protect_content_handler(RequestCtx* ctx) noexcept;

// A client timeout detaches the client instead of ending the exchange.
void guard_client_timeout(RequestCtx* ctx) noexcept;

// When nginx terminates the request (after the upstream was done), what the
// filters above the capture hold is captured first. False when out of memory.
bool drain_when_terminated(RequestCtx* ctx) noexcept;

// What the filters below hold is dropped; the body filter swallows from now on.
void detach(ngx_http_request_t* r, RequestCtx* ctx);
void consume(ngx_chain_t* cl);

}  // namespace idem
