// pieces.hpp — a response too large for one record, kept in pieces
// (docs/design.md#large-responses-in-pieces): its body cut into pieces of
// piece_body_size(idempotency_piece_size) bytes, each under a key of its own, named by
// the store key and the id of the claim that wrote it, on the store key's
// Redis Cluster slot; the record under the store key (record version 4,
// record.hpp's PieceList) lists them. Pure: knows nothing of nginx or of
// the stores.
//
// A piece's value (integers big-endian):
//   "IDM" 4 kind(4, piece) id(16) index(4) form(1) payload
// form 0: the payload is the piece's body bytes; form 1: one zstd frame
// (with its checksum) that opens into them. With encryption at rest the
// value is sealed, bound to the piece's key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "record.hpp"

namespace idem {

constexpr std::uint8_t piece_kind = 4;
constexpr std::uint8_t piece_form_plain = 0;
constexpr std::uint8_t piece_form_zstd = 1;
// magic, version, kind, id, index: what names the piece
constexpr std::size_t piece_name_size = 3 + 1 + 1 + pieces_id_size + 4;
// ... and the form: what comes before the payload
constexpr std::size_t piece_head_size = piece_name_size + 1;

constexpr std::size_t min_piece_size = 64 * 1024;
constexpr std::size_t max_piece_size = max_piece_bytes;
// A piece's value, its head, envelope and the store's own header
// included, stays within idempotency_piece_size: it fills the allocator's
// size class of that size rather than spilling into the next one (a
// quarter larger). The body bytes a piece holds:
constexpr std::size_t piece_room = 128;
constexpr std::size_t piece_body_size(std::size_t piece_size) noexcept
{
    return piece_size - piece_room;
}
// The most body bytes a response keeps in memory while it is captured:
// its whole body, unless idempotency_max_response_size is above
// idempotency_piece_size, which lets larger responses be kept in pieces:
// then one piece's.
constexpr std::size_t capture_limit(std::size_t max_response_size, std::size_t piece_size) noexcept
{
    return max_response_size > piece_size ? piece_body_size(piece_size) : max_response_size;
}

// Whether pieces can share the Redis Cluster slot of every store key under
// `prefix` (idempotency_key_prefix): a prefix holding a '}' that does not
// close a hash tag cannot be given one.
bool pieces_keyable(std::string_view prefix) noexcept;

// The keys of one response's pieces: a common base, then the index in 8
// hex digits. The base keeps the store key's slot: the store key itself
// when it has a hash tag, else the store key made one ("{key}").
std::size_t piece_base_size(std::string_view store_key) noexcept;
// Writes the base (room for piece_base_size) for the pieces named `id`.
std::size_t write_piece_base(std::string_view store_key, std::string_view id, char* out) noexcept;
constexpr std::size_t piece_index_digits = 8;
// Room for any piece's key: a store key (a key prefix of at most 256
// bytes, 64 hex digits) made a hash tag, then ":p", 32 hex digits, ':'
// and the index.
constexpr std::size_t max_piece_key_size = 256 + 64 + 2 + 2 + 2 * pieces_id_size + 1 + piece_index_digits;
// Writes piece `index`'s key (room for base.size() + piece_index_digits).
std::size_t write_piece_key(std::string_view base, std::uint32_t index, char* out) noexcept;

char* encode_piece_head(char* out, std::string_view id, std::uint32_t index, std::uint8_t form) noexcept;

struct Piece {
    std::string_view id;
    std::uint32_t index = 0;
    std::uint8_t form = 0;
    std::string_view payload;
};
// nullopt for anything that is not a piece of a form this release reads.
std::optional<Piece> decode_piece(std::string_view bytes) noexcept;

// What a store's look at the pieces (PieceStore::pieces_look) answers: for each
// piece in order, its size in the store (absent_piece, or 0 from Redis:
// there is none) and its first piece_name_size bytes (zero-filled past
// its end).
constexpr std::uint32_t absent_piece = 0xffffffffu;
constexpr std::size_t piece_look_entry_size = 4 + piece_name_size;
char* encode_piece_look(char* out, std::uint32_t stored_size, std::string_view value) noexcept;

// Whether the look shows every piece `pieces` lists, each of the size it
// was stored with and, unless sealed (`sealed`), named as it: none missing,
// none of another response (stale) or altered in size. Returns the index
// of the first that is not, or pieces.count when all are.
std::uint32_t first_bad_piece(const PieceList& pieces, std::string_view look, bool sealed) noexcept;

}  // namespace idem
