// piece_writer.hpp — writes a large response's pieces to the store while the
// capture fills them, one at a time, retrying as a record is for up to
// idempotency_lock_ttl; the record that lists them goes after the last has
// landed. Outlives its request: owned by the capture until done, then by
// itself until every piece and the record's outcome are answered.
// See docs/design.md#large-responses-in-pieces.
#pragma once

#include <cstdint>
#include <string_view>

#include "record.hpp"
#include "record_bytes.hpp"
#include "store.hpp"

namespace idem {

struct RequestCtx;
struct PieceWriter;

// nullptr when out of memory (the response is then not kept). `answered` is
// called each time a piece landed or failed for good, until pieces_done.
PieceWriter* pieces_begin(RequestCtx* ctx, void (*answered)(void* data), void* data) noexcept;

// Written and unanswered, or waiting to be sent again: the next one waits.
bool pieces_busy(const PieceWriter* w) noexcept;

// Only when !pieces_busy; false once the response can no longer be kept (a
// piece refused, too many pieces, no memory).
bool pieces_put(PieceWriter* w, std::string_view body) noexcept;

// Views into the writer.
PieceList pieces_list(const PieceWriter* w, std::uint64_t body_size) noexcept;

// The response is then not kept.
bool pieces_failed(const PieceWriter* w) noexcept;

// Pass to ClaimStore::complete with the record that lists the pieces.
StoreNotice pieces_record_notice(PieceWriter* w) noexcept;

// No more `answered` calls. With `keep` (every piece landed, the record sent
// with the notice) the pieces outlive a record that landed and go with one
// that did not; without, they are deleted once the store answered them.
void pieces_done(PieceWriter* w, bool keep) noexcept;

}  // namespace idem
