// piece_writer.hpp — writes the pieces of a response too large for one
// record (pieces.hpp) to the store while the capture fills them, one at a
// time: a piece goes once the store has answered the one before, and a
// piece the store did not answer (a lost connection, a transient error) is
// sent again, as a record is, for up to idempotency_lock_ttl
// (docs/design.md#large-responses-in-pieces).
// The record that lists them goes after the last one has landed; told what
// became of it, the writer keeps the pieces (their expiry pushed out) or
// deletes them. The writer outlives its request: the record's outcome, and
// the answers to pieces of a response not kept, come after the response's
// last byte went out. Owned by the capture until it is done, then by
// itself until the store has answered every piece and told the record's
// outcome.
#pragma once

#include <cstdint>
#include <string_view>

#include "record.hpp"
#include "record_bytes.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;
struct PieceWriter;

// A writer for the response of `ctx`, whose claim is held; nullptr when
// out of memory (the response is then not kept). `answered(data)` is
// called each time the store has answered a piece (it landed, or failed
// for good), until pieces_done.
PieceWriter* pieces_begin(RequestCtx* ctx, void (*answered)(void* data), void* data) noexcept;

// Whether a piece is at the store — written and not answered yet, or
// waiting to be sent again —: the next one waits for it.
bool pieces_busy(const PieceWriter* w) noexcept;

// Writes the next piece (piece_body_size bytes of the body, the last
// piece fewer), when no piece is at the store (pieces_busy); false once
// the response can no longer be kept (a piece the store refused, too many
// pieces, no memory).
bool pieces_put(PieceWriter* w, std::string_view body) noexcept;

// The pieces written, as the record lists them (views into the writer).
PieceList pieces_list(const PieceWriter* w, std::uint64_t body_size) noexcept;

// Whether a piece failed to be written or stored so far: the response is
// then not kept.
bool pieces_failed(const PieceWriter* w) noexcept;

// The record that lists the pieces is about to go to the store
// (ClaimStore::complete): what became of it is told to the writer through this.
StoreNotice pieces_record_notice(PieceWriter* w) noexcept;

// The capture is done and lets go of `w` (no more `answered` calls). With
// `keep`, every piece has landed and the record went to the store with
// the notice above: once it is told the record landed, the pieces' expiry
// is pushed out (they outlive the record); one that did not land has its
// pieces deleted at once. Without `keep` (cut off, too large, a piece
// lost, its request gone) the pieces written are deleted once the store
// has answered them.
void pieces_done(PieceWriter* w, bool keep) noexcept;

}  // namespace idem
