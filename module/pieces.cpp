// pieces.cpp — see pieces.hpp.
#include "pieces.hpp"

#include <cstring>

#include "big_endian.hpp"

namespace idem {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";

// The part of `key` Redis Cluster hashes, when it has a hash tag: between
// the first '{' and the next '}', when not empty.
bool has_hash_tag(std::string_view key) noexcept
{
    std::size_t open = key.find('{');
    if (open == std::string_view::npos) {
        return false;
    }
    std::size_t close = key.find('}', open + 1);
    return close != std::string_view::npos && close > open + 1;
}

char* put_hex(char* out, std::string_view bytes) noexcept
{
    for (char c : bytes) {
        auto b = static_cast<unsigned char>(c);
        *out++ = hex_digits[b >> 4];
        *out++ = hex_digits[b & 15];
    }
    return out;
}

}  // namespace

bool pieces_keyable(std::string_view prefix) noexcept
{
    // with a tag, the prefix keeps it in every key; without one, "{key}"
    // hashes the key whole unless the key holds a '}' of its own
    return has_hash_tag(prefix) || prefix.find('}') == std::string_view::npos;
}

std::size_t piece_base_size(std::string_view store_key) noexcept
{
    return store_key.size() + (has_hash_tag(store_key) ? 0 : 2) + 2 + 2 * pieces_id_size + 1;
}

std::size_t write_piece_base(std::string_view store_key, std::string_view id, char* out) noexcept
{
    char* p = out;
    bool tagged = has_hash_tag(store_key);
    if (!tagged) {
        *p++ = '{';
    }
    std::memcpy(p, store_key.data(), store_key.size());
    p += store_key.size();
    if (!tagged) {
        *p++ = '}';
    }
    *p++ = ':';
    *p++ = 'p';
    p = put_hex(p, id.substr(0, pieces_id_size));
    *p++ = ':';
    return static_cast<std::size_t>(p - out);
}

std::size_t write_piece_key(std::string_view base, std::uint32_t index, char* out) noexcept
{
    std::memcpy(out, base.data(), base.size());
    char* p = out + base.size();
    for (std::size_t i = 0; i < piece_index_digits; i++) {
        p[i] = hex_digits[(index >> (4 * (piece_index_digits - 1 - i))) & 15];
    }
    return base.size() + piece_index_digits;
}

char* encode_piece_head(char* out, std::string_view id, std::uint32_t index, std::uint8_t form) noexcept
{
    std::memcpy(out, record_magic.data(), record_magic.size());
    out[3] = static_cast<char>(record_version_pieces);
    out[4] = static_cast<char>(piece_kind);
    std::memcpy(out + 5, id.data(), pieces_id_size);
    char* p = put_be<std::uint32_t>(out + 5 + pieces_id_size, index);
    *p++ = static_cast<char>(form);
    return p;
}

std::optional<Piece> decode_piece(std::string_view bytes) noexcept
{
    if (bytes.size() < piece_head_size || bytes.substr(0, 3) != record_magic
        || static_cast<unsigned char>(bytes[3]) != record_version_pieces
        || static_cast<unsigned char>(bytes[4]) != piece_kind) {
        return std::nullopt;
    }
    Piece piece;
    piece.id = bytes.substr(5, pieces_id_size);
    piece.index = get_be<std::uint32_t>(bytes.data() + 5 + pieces_id_size);
    piece.form = static_cast<std::uint8_t>(bytes[piece_name_size]);
    if (piece.form != piece_form_plain && piece.form != piece_form_zstd) {
        return std::nullopt;
    }
    piece.payload = bytes.substr(piece_head_size);
    return piece;
}

char* encode_piece_look(char* out, std::uint32_t stored_size, std::string_view value) noexcept
{
    char* p = put_be<std::uint32_t>(out, stored_size);
    std::size_t n = value.size() < piece_name_size ? value.size() : piece_name_size;
    if (n != 0) {  // an absent piece's view may have no bytes at all
        std::memcpy(p, value.data(), n);
    }
    std::memset(p + n, 0, piece_name_size - n);
    return p + piece_name_size;
}

std::uint32_t first_bad_piece(const PieceList& pieces, std::string_view look, bool sealed) noexcept
{
    char name[piece_head_size];
    for (std::uint32_t i = 0; i < pieces.count; i++) {
        std::size_t at = std::size_t{i} * piece_look_entry_size;
        if (look.size() < at + piece_look_entry_size) {
            return i;
        }
        std::uint32_t size = get_be<std::uint32_t>(look.data() + at);
        if (size == absent_piece || size != pieces.stored_size(i)) {
            return i;
        }
        encode_piece_head(name, pieces.id, i, 0);  // the name alone: the form is not part of it
        if (!sealed && std::memcmp(look.data() + at + 4, name, piece_name_size) != 0) {
            return i;
        }
    }
    return pieces.count;
}

}  // namespace idem
