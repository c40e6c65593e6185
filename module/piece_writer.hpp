// piece_writer.hpp — writes the pieces of a response too large for one
// record (pieces.hpp) to the store while the capture fills them, and the
// record that lists them goes after the last one
// (docs/design.md#large-responses-in-pieces). The writer outlives its
// request: the last pieces are answered after the response's last byte
// went out. Owned by the capture until it is done, then by itself until
// the store has answered every piece.
#pragma once

#include <cstdint>
#include <string_view>

#include "record.hpp"
#include "record_bytes.hpp"

namespace idem {

struct RequestCtx;
struct PieceWriter;

// A writer for the response of `ctx`, whose claim is held; nullptr when
// out of memory (the response is then not kept).
PieceWriter* pieces_begin(RequestCtx* ctx) noexcept;

// Writes the next piece (piece_body_size bytes of the body, the last
// piece fewer); false once the response can no longer be kept (a piece
// the store refused, or no memory).
bool pieces_put(PieceWriter* w, std::string_view body) noexcept;

// The pieces written, as the record lists them (views into the writer).
PieceList pieces_list(const PieceWriter* w, std::uint64_t body_size) noexcept;

// Whether a piece failed to be written or stored so far: the response is
// then not kept.
bool pieces_failed(const PieceWriter* w) noexcept;

// The capture is done and lets go of `w`: with `keep`, its record went to
// the store (after the pieces, on the same connection: the store takes
// them in that order); the writer stays until the store has answered every
// piece, and a piece refused then is logged (the record's retries get 410:
// never a part of the response, never a second execution) and the others
// are deleted. Without `keep` (cut off, too large, its request gone) the
// pieces written are deleted once the store has answered them.
void pieces_done(PieceWriter* w, bool keep) noexcept;

}  // namespace idem
