// compression.cpp — see compression.hpp.
#include "compression.hpp"

#include <zstd.h>

#include <cstring>
#include <new>

#include "big_endian.hpp"

namespace idem {
namespace {

// Where the plain record's prefix (record_prefix_size) keeps what a
// compressed one keeps at the same places.
constexpr std::size_t version_at = 3;
constexpr std::size_t kind_at = 4;
constexpr std::size_t fingerprint_at = 5;
// After the prefix: the status, then the form, the plain version and size.
constexpr std::size_t status_at = record_prefix_size;
constexpr std::size_t form_at = status_at + 2;

bool has_magic(std::string_view bytes) noexcept
{
    return bytes.substr(0, record_magic.size()) == record_magic;
}

}  // namespace

std::optional<CompressedHead> compressed_head(std::string_view bytes, RecordFlaw* flaw) noexcept
{
    RecordFlaw ignored = RecordFlaw::none;
    RecordFlaw& found = flaw != nullptr ? *flaw : ignored;
    found = RecordFlaw::none;
    if (bytes.size() <= version_at || !has_magic(bytes)
        || static_cast<unsigned char>(bytes[version_at]) != record_version_compressed) {
        return std::nullopt;  // not compressed
    }
    // compressed, as far as it says: what does not read is damaged
    found = RecordFlaw::damaged;
    if (bytes.size() <= form_at || static_cast<RecordKind>(bytes[kind_at]) != RecordKind::response) {
        return std::nullopt;
    }
    if (static_cast<unsigned char>(bytes[form_at]) != compressed_form_zstd) {
        found = RecordFlaw::newer_version;
        return std::nullopt;
    }
    if (bytes.size() < compressed_prefix_size) {
        return std::nullopt;
    }
    const unsigned plain_version = static_cast<unsigned char>(bytes[form_at + 1]);
    if (plain_version > record_version_pieces) {
        found = RecordFlaw::newer_version;  // a later release's layout inside
        return std::nullopt;
    }
    if (plain_version != record_version && plain_version != record_version_extras) {
        return std::nullopt;
    }
    found = RecordFlaw::none;
    CompressedHead head;
    std::memcpy(head.fingerprint.data(), bytes.data() + fingerprint_at, head.fingerprint.size());
    head.status = get_be<std::uint16_t>(bytes.data() + status_at);
    head.plain_size = record_prefix_size + get_be<std::uint32_t>(bytes.data() + form_at + 2);
    head.frame = bytes.substr(compressed_prefix_size);
    return head;
}

RecordCompressor::~RecordCompressor()
{
    ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

std::size_t RecordCompressor::bound(std::size_t plain_size) noexcept
{
    return compressed_prefix_size + ZSTD_compressBound(plain_size);
}

ZstdDictionary* ZstdDictionary::create(std::string_view bytes, int level) noexcept
{
    const unsigned id = ZSTD_getDictID_fromDict(bytes.data(), bytes.size());
    if (id == 0) {
        return nullptr;
    }
    auto* d = new (std::nothrow) ZstdDictionary;
    if (d == nullptr) {
        return nullptr;
    }
    d->id_ = id;
    d->cdict_ = ZSTD_createCDict(bytes.data(), bytes.size(), level);
    d->ddict_ = ZSTD_createDDict(bytes.data(), bytes.size());
    if (d->cdict_ == nullptr || d->ddict_ == nullptr) {
        delete d;
        return nullptr;
    }
    return d;
}

ZstdDictionary::~ZstdDictionary()
{
    ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict_));
    ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
}

const ZstdDictionary* Dictionaries::find(std::uint32_t id) const noexcept
{
    for (std::size_t i = 0; i < count; i++) {
        if (list[i]->id() == id) {
            return list[i];
        }
    }
    return nullptr;
}

std::uint32_t frame_dictionary(std::string_view frame) noexcept
{
    return ZSTD_getDictID_fromFrame(frame.data(), frame.size());
}

std::size_t RecordCompressor::compress(std::string_view plain, char* out, const ZstdDictionary* dictionary) noexcept
{
    if (plain.size() < min_compressed(dictionary) || plain.size() < record_prefix_size + 2 || !has_magic(plain)
        || static_cast<RecordKind>(plain[kind_at]) != RecordKind::response
        || (static_cast<unsigned char>(plain[version_at]) != record_version
            && static_cast<unsigned char>(plain[version_at]) != record_version_extras)
        || plain.size() - record_prefix_size > UINT32_MAX) {
        return 0;
    }
    const std::string_view inner = plain.substr(record_prefix_size);
    const std::size_t n =
        compress_frame(inner, out + compressed_prefix_size, ZSTD_compressBound(inner.size()), dictionary);
    if (n == 0) {
        return 0;
    }
    const std::size_t size = compressed_prefix_size + n;
    if (!compression_pays(plain.size(), size)) {
        return 0;
    }
    std::memcpy(out, plain.data(), record_prefix_size);  // magic, version (overwritten), kind, fingerprint
    out[version_at] = static_cast<char>(record_version_compressed);
    std::memcpy(out + status_at, inner.data(), 2);  // the status, first in every response
    out[form_at] = static_cast<char>(compressed_form_zstd);
    out[form_at + 1] = plain[version_at];
    put_be(out + form_at + 2, static_cast<std::uint32_t>(inner.size()));
    return size;
}

std::size_t RecordCompressor::frame_bound(std::size_t size) noexcept
{
    return ZSTD_compressBound(size);
}

std::size_t RecordCompressor::compress_frame(std::string_view in, char* out, std::size_t room,
                                             const ZstdDictionary* dictionary) noexcept
{
    if (cctx_ == nullptr) {
        ZSTD_CCtx* cctx = ZSTD_createCCtx();
        if (cctx == nullptr || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_))
            || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))) {
            ZSTD_freeCCtx(cctx);
            return 0;
        }
        cctx_ = cctx;
    }
    auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
    const auto* cdict = static_cast<const ZSTD_CDict*>(dictionary != nullptr ? dictionary->cdict() : nullptr);
    if (ZSTD_isError(ZSTD_CCtx_refCDict(cctx, cdict))) {
        return 0;
    }
    const std::size_t n = ZSTD_compress2(cctx, out, room, in.data(), in.size());
    if (ZSTD_isError(n)) {
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
    }
    if (cdict != nullptr) {
        ZSTD_CCtx_refCDict(cctx, nullptr);  // the next frame without it, unless asked
    }
    return ZSTD_isError(n) ? 0 : n;
}

RecordInflater::~RecordInflater()
{
    ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

std::optional<std::string_view> RecordInflater::inflate(std::string_view record, const CompressedHead& head,
                                                         char* out, const Dictionaries& dictionaries) noexcept
{
    if (!inflate_frame(head.frame, out + record_prefix_size, head.plain_size - record_prefix_size, dictionaries)) {
        return std::nullopt;
    }
    const std::size_t inner_size = head.plain_size - record_prefix_size;
    std::memcpy(out, record.data(), record_prefix_size);
    out[version_at] = record[form_at + 1];  // the plain record's version
    // the status outside the frame must be the one inside it
    if (inner_size < 2 || std::memcmp(out + status_at, record.data() + status_at, 2) != 0) {
        return std::nullopt;
    }
    return std::string_view(out, head.plain_size);
}

bool RecordInflater::inflate_frame(std::string_view frame, char* out, std::size_t size,
                                   const Dictionaries& dictionaries) noexcept
{
    if (dctx_ == nullptr) {
        dctx_ = ZSTD_createDCtx();
        if (dctx_ == nullptr) {
            return false;
        }
    }
    const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (declared != size || ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size()) {
        return false;
    }
    // a frame made with a dictionary opens with that one only
    const std::uint32_t id = frame_dictionary(frame);
    const ZstdDictionary* dictionary = id != 0 ? dictionaries.find(id) : nullptr;
    if (id != 0 && dictionary == nullptr) {
        return false;
    }
    const std::size_t n =
        dictionary != nullptr
            ? ZSTD_decompress_usingDDict(static_cast<ZSTD_DCtx*>(dctx_), out, size, frame.data(), frame.size(),
                                         static_cast<const ZSTD_DDict*>(dictionary->ddict()))
            : ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), out, size, frame.data(), frame.size());
    if (ZSTD_isError(n) || n != size) {
        ZSTD_DCtx_reset(static_cast<ZSTD_DCtx*>(dctx_), ZSTD_reset_session_only);
        return false;
    }
    return true;
}

}  // namespace idem
