// pieces.hpp — a response too large for one record, its body in pieces under
// keys of their own, on the store key's Redis Cluster slot; the version-4
// record lists them. Pure. See docs/design.md#large-responses-in-pieces.
// A piece's value (big-endian; sealed, bound to its key, at rest):
//   "IDM" 4 kind(4, piece) id(16) index(4) form(1) payload
// form 0: the body bytes; form 1: one zstd frame (with checksum) of them.
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
// what names the piece
constexpr std::size_t piece_name_size = 3 + 1 + 1 + pieces_id_size + 4;
constexpr std::size_t piece_head_size = piece_name_size + 1;

constexpr std::size_t min_piece_size = 64 * 1024;
constexpr std::size_t max_piece_size = max_piece_bytes;
// Head, envelope and the store's own header included, a value stays within
// idempotency_piece_size: it fills that allocator size class rather than
// spilling into the next (a quarter larger).
constexpr std::size_t piece_room = 128;
constexpr std::size_t piece_body_size(std::size_t piece_size) noexcept
{
    return piece_size - piece_room;
}
// Its whole body, unless responses may be kept in pieces: then one piece's.
constexpr std::size_t capture_limit(std::size_t max_response_size, std::size_t piece_size) noexcept
{
    return max_response_size > piece_size ? piece_body_size(piece_size) : max_response_size;
}

// A prefix holding a '}' that does not close a hash tag cannot be given one.
bool pieces_keyable(std::string_view prefix) noexcept;

// A common base, then the index in 8 hex digits. The base keeps the store
// key's slot: the key itself if it has a hash tag, else "{key}".
std::size_t piece_base_size(std::string_view store_key) noexcept;
std::size_t write_piece_base(std::string_view store_key, std::string_view id, char* out) noexcept;
constexpr std::size_t piece_index_digits = 8;
// A store key (prefix of at most 256 bytes, 64 hex digits) made a hash tag,
// ":p", 32 hex digits, ':' and the index.
constexpr std::size_t max_piece_key_size = 256 + 64 + 2 + 2 + 2 * pieces_id_size + 1 + piece_index_digits;
std::size_t write_piece_key(std::string_view base, std::uint32_t index, char* out) noexcept;

char* encode_piece_head(char* out, std::string_view id, std::uint32_t index, std::uint8_t form) noexcept;

struct Piece {
    std::string_view id;
    std::uint32_t index = 0;
    std::uint8_t form = 0;
    std::string_view payload;
};
std::optional<Piece> decode_piece(std::string_view bytes) noexcept;

// For each piece in order: its size in the store (absent_piece, or 0 from
// Redis: none) and its first piece_name_size bytes (zero-filled past its end).
constexpr std::uint32_t absent_piece = 0xffffffffu;
constexpr std::size_t piece_look_entry_size = 4 + piece_name_size;
char* encode_piece_look(char* out, std::uint32_t stored_size, std::string_view value) noexcept;

// Each piece must be there with its stored size and, unless sealed, its name.
// Returns the first that is not, or pieces.count when all are.
std::uint32_t first_bad_piece(const PieceList& pieces, std::string_view look, bool sealed) noexcept;

}  // namespace idem
