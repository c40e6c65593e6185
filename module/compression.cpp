// compression.cpp — see compression.hpp.
#include "compression.hpp"

#include <zstd.h>

#include <cstring>

namespace idem {
namespace {

constexpr char magic[3] = {'I', 'D', 'M'};
// What precedes the part a frame holds, in a plain record: magic version kind fingerprint.
constexpr std::size_t plain_prefix_size = 3 + 1 + 1 + 32;
constexpr std::size_t version_at = 3;
constexpr std::size_t kind_at = 4;
constexpr std::size_t fingerprint_at = 5;

std::uint64_t read_be(const char* p, std::size_t n) noexcept
{
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        v = (v << 8) | static_cast<unsigned char>(p[i]);
    }
    return v;
}

void write_be(char* p, std::uint64_t v, std::size_t n) noexcept
{
    for (std::size_t i = n; i-- > 0;) {
        *p++ = static_cast<char>((v >> (8 * i)) & 0xff);
    }
}

}  // namespace

std::optional<CompressedHead> compressed_head(std::string_view bytes, RecordFlaw* flaw) noexcept
{
    if (flaw != nullptr) {
        *flaw = RecordFlaw::none;
    }
    // magic, version, kind, fingerprint, status, form
    constexpr std::size_t form_at = plain_prefix_size + 2;
    if (bytes.size() <= form_at || std::memcmp(bytes.data(), magic, sizeof magic) != 0
        || static_cast<unsigned char>(bytes[version_at]) != record_version_compressed
        || static_cast<RecordKind>(bytes[kind_at]) != RecordKind::response) {
        return std::nullopt;
    }
    if (static_cast<unsigned char>(bytes[form_at]) != compressed_form_zstd) {
        if (flaw != nullptr) {
            *flaw = RecordFlaw::newer_version;
        }
        return std::nullopt;
    }
    if (bytes.size() < compressed_prefix_size) {
        return std::nullopt;
    }
    const unsigned plain_version = static_cast<unsigned char>(bytes[form_at + 1]);
    if (plain_version != record_version && plain_version != record_version_extras) {
        return std::nullopt;
    }
    CompressedHead head;
    std::memcpy(head.fingerprint.data(), bytes.data() + fingerprint_at, head.fingerprint.size());
    head.status = static_cast<std::uint16_t>(read_be(bytes.data() + plain_prefix_size, 2));
    head.plain_size = plain_prefix_size + read_be(bytes.data() + form_at + 2, 4);
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

std::size_t RecordCompressor::compress(std::string_view plain, char* out) noexcept
{
    if (plain.size() < min_compressed_plain || plain.size() < plain_prefix_size + 2
        || std::memcmp(plain.data(), magic, sizeof magic) != 0
        || static_cast<RecordKind>(plain[kind_at]) != RecordKind::response
        || (static_cast<unsigned char>(plain[version_at]) != record_version
            && static_cast<unsigned char>(plain[version_at]) != record_version_extras)
        || plain.size() - plain_prefix_size > UINT32_MAX) {
        return 0;
    }
    if (cctx_ == nullptr) {
        ZSTD_CCtx* cctx = ZSTD_createCCtx();
        if (cctx == nullptr || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_))
            || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))) {
            ZSTD_freeCCtx(cctx);
            return 0;
        }
        cctx_ = cctx;
    }
    const std::string_view inner = plain.substr(plain_prefix_size);
    const std::size_t room = ZSTD_compressBound(inner.size());
    const std::size_t n = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), out + compressed_prefix_size, room,
                                         inner.data(), inner.size());
    if (ZSTD_isError(n)) {
        ZSTD_CCtx_reset(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_reset_session_only);
        return 0;
    }
    const std::size_t size = compressed_prefix_size + n;
    if (size + min_compression_saving > plain.size() || size > plain.size() - plain.size() / 16) {
        return 0;
    }
    std::memcpy(out, plain.data(), plain_prefix_size);  // magic, version (overwritten), kind, fingerprint
    out[version_at] = static_cast<char>(record_version_compressed);
    std::memcpy(out + plain_prefix_size, inner.data(), 2);  // the status, first in every response
    char* p = out + plain_prefix_size + 2;
    *p++ = static_cast<char>(compressed_form_zstd);
    *p++ = plain[version_at];
    write_be(p, inner.size(), 4);
    return size;
}

RecordInflater::~RecordInflater()
{
    ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

std::optional<std::string_view> RecordInflater::inflate(std::string_view record, const CompressedHead& head,
                                                         char* out) noexcept
{
    if (dctx_ == nullptr) {
        dctx_ = ZSTD_createDCtx();
        if (dctx_ == nullptr) {
            return std::nullopt;
        }
    }
    // exactly one frame, declaring exactly the size the head says
    const unsigned long long declared = ZSTD_getFrameContentSize(head.frame.data(), head.frame.size());
    const std::size_t inner_size = head.plain_size - plain_prefix_size;
    if (declared != inner_size || ZSTD_findFrameCompressedSize(head.frame.data(), head.frame.size()) != head.frame.size()) {
        return std::nullopt;
    }
    const std::size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), out + plain_prefix_size, inner_size,
                                              head.frame.data(), head.frame.size());
    if (ZSTD_isError(n) || n != inner_size) {
        ZSTD_DCtx_reset(static_cast<ZSTD_DCtx*>(dctx_), ZSTD_reset_session_only);
        return std::nullopt;
    }
    const std::size_t plain_version_at = plain_prefix_size + 2 + 1;
    std::memcpy(out, record.data(), plain_prefix_size);
    out[version_at] = record[plain_version_at];
    // the status outside the frame must be the one inside it
    if (inner_size < 2 || std::memcmp(out + plain_prefix_size, record.data() + plain_prefix_size, 2) != 0) {
        return std::nullopt;
    }
    return std::string_view(out, head.plain_size);
}

}  // namespace idem
