// record_bytes.hpp — who frees a record's bytes, in the type, for the zero-copy
// hand-off between request and store: owns an ngx_alloc'd block (ngx_alloc is
// malloc), handed on by moving, or borrows bytes alive until the call
// returns, which a keeper must copy. Pure.
#pragma once

#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

namespace idem {

class RecordBytes {
public:
    RecordBytes() noexcept = default;

    // block nullptr: owns nothing, the bytes borrowed.
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
    bool owns() const noexcept { return block_ != nullptr; }

    // For a caller that frees it with ngx_free (a pool cleanup); nullptr when
    // borrowed. Leaves the object empty.
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
