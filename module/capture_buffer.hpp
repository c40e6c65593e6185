// capture_buffer.hpp — the record buffer a claimed request's response is
// recorded into, and its spill into pieces (capture_buffer.cpp); private
// to capture*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "record.hpp"
#include "request_ctx.hpp"

namespace idem {

// The most body bytes the record buffer holds: the whole body, or, for a
// response that may be kept in pieces, one piece's.
size_t buffer_limit(const RequestCtx* ctx) noexcept;
// The record buffer, at the response's header (its headers collected):
// room for the head of a record with extras, and for the body its
// Content-Length says (up to buffer_limit), else for a first part of it.
// False when the headers cannot make a record, or out of memory.
bool open_record(ngx_http_request_t* r, RequestCtx* ctx);

// What reserve() found.
enum class Room : std::uint8_t {
    some,  // room for some bytes
    wait,  // none until the store answers the piece it is at
    none,  // the response can no longer be kept (over idempotency_max_response_size, out of memory, a piece the
           // store refused: the same outcome)
};

// Room for up to `want` more body bytes at the end of the record buffer:
// where they go (`to`), and in `got` how many fit. A full buffer spills its
// bytes to the store as a piece, unless one is at the store still (wait).
Room reserve(ngx_http_request_t* r, RequestCtx* ctx, size_t want, char*& to, size_t& got);
// Room for a record's tail (its trailers) after the body; nullptr when the
// response can no longer be kept.
char* reserve_tail(ngx_http_request_t* r, RequestCtx* ctx, size_t tail) noexcept;
// A response kept in pieces has come to its end: true once its last piece
// went and every piece is answered (or the response was lost on the way),
// so that its record may go; false while the store is at one.
bool pieces_landed(RequestCtx* ctx) noexcept;
// The last byte has passed and the response can be kept: its record goes
// to the claim — the buffer itself, head and tail written around the body,
// or, kept in pieces (every piece landed), the record that lists them —,
// or, when it cannot be made, the marker of an unreplayable response.
void complete_record(ngx_http_request_t* r, RequestCtx* ctx, const ResponseExtras& extras);
// The buffer is let go; pieces already written are deleted.
void free_record(RequestCtx* ctx);
// The response can no longer be kept: it ends as unreplayable (`why`).
void lose(RequestCtx* ctx, const char* why);

}  // namespace idem
