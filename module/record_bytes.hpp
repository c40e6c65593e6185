// record_bytes.hpp — who frees a record's bytes, in the type: the zero-copy
// hand-off of a record between the request and its store. A RecordBytes
// either owns the block its bytes lie in — ngx_alloc'd memory (nginx's
// ngx_alloc is malloc, its ngx_free is free), freed with it, handed on by
// moving — or borrows bytes someone else keeps alive until the call
// returns, which whoever keeps them must copy. Move-only. Pure: knows
// nothing of nginx (unit-tested in t/unit/test_record_bytes.cpp).
#pragma once

#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

namespace idem {

class RecordBytes {
public:
    RecordBytes() noexcept = default;

    // `bytes` lying within `block`, taken over (nullptr: owns nothing, the
    // bytes borrowed).
    static RecordBytes owned(char* block, std::string_view bytes) noexcept { return {block, bytes}; }
    static RecordBytes borrowed(std::string_view bytes) noexcept { return {nullptr, bytes}; }

    RecordBytes(RecordBytes&& other) noexcept
        : block_(std::move(other.block_)), bytes_(std::exchange(other.bytes_, {}))
    {
    }
    RecordBytes& operator=(RecordBytes&& other) noexcept
    {
        block_ = std::move(other.block_);
        bytes_ = std::exchange(other.bytes_, {});
        return *this;
    }

    std::string_view view() const noexcept { return bytes_; }
    // Whether the bytes are this object's to free (and so to hand on
    // without copying).
    bool owns() const noexcept { return block_ != nullptr; }

    // Hands the block over to a caller that frees it with ngx_free itself
    // (an nginx pool cleanup); nullptr when the bytes were borrowed. The
    // object is left empty.
    char* release() noexcept
    {
        bytes_ = {};
        return block_.release();
    }

private:
    struct Free {
        void operator()(char* block) const noexcept { std::free(block); }  // ngx_free
    };

    RecordBytes(char* block, std::string_view bytes) noexcept : block_(block), bytes_(bytes) {}

    std::unique_ptr<char, Free> block_;
    std::string_view bytes_;
};

}  // namespace idem
