// capture_buffer.hpp — the record buffer a response is recorded into, and its
// spill into pieces; private to capture*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "record.hpp"
#include "request_ctx.hpp"

namespace idem {

// The whole body, or, for a response that may be kept in pieces, one piece's.
size_t buffer_limit(const RequestCtx* ctx) noexcept;
// Room for the head and the Content-Length's body (up to buffer_limit), else
// a first part. False when the headers cannot make a record, or out of memory.
bool open_record(ngx_http_request_t* r, RequestCtx* ctx);

enum class Room : std::uint8_t {
    some,  // room for some bytes
    wait,  // none until the store answers the piece it is at
    none,  // the response can no longer be kept (over idempotency_max_response_size, out of memory, a piece the
           // store refused: the same outcome)
};

// A full buffer spills to the store as a piece, unless one is there still (wait).
Room reserve(ngx_http_request_t* r, RequestCtx* ctx, size_t want, char*& to, size_t& got);
// nullptr when the response can no longer be kept.
char* reserve_tail(ngx_http_request_t* r, RequestCtx* ctx, size_t tail) noexcept;
// True once the last piece went and every piece is answered (or the response
// was lost), so the record may go; false while the store is at one.
bool pieces_landed(RequestCtx* ctx) noexcept;
// The buffer itself, or the record listing the pieces, or the marker when
// it cannot be made.
void complete_record(ngx_http_request_t* r, RequestCtx* ctx, const ResponseExtras& extras);
// Pieces already written are deleted.
void free_record(RequestCtx* ctx);
// It ends as unreplayable (`why`).
void lose(RequestCtx* ctx, const char* why);

}  // namespace idem
