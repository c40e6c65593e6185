// test_record_bytes.cpp — record_bytes.hpp: owned bytes are freed exactly
// once, by whoever holds them last; moving hands them on and leaves nothing
// behind; release() gives the block up; borrowed bytes are never freed.
// Freeing is observed through glibc's count of bytes in use.
#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "record_bytes.hpp"

namespace {

using idem::RecordBytes;

constexpr std::size_t block_size = 64 * 1024;  // below mmap's threshold: counted in uordblks

std::size_t in_use()
{
    return mallinfo2().uordblks;
}

// A block as ngx_alloc makes it, its middle half the record.
RecordBytes make_owned(char*& block)
{
    block = static_cast<char*>(std::malloc(block_size));
    std::memset(block, 'r', block_size);
    return RecordBytes::owned(block, {block + block_size / 4, block_size / 2});
}

static_assert(!std::is_copy_constructible_v<RecordBytes>, "one owner");
static_assert(!std::is_copy_assignable_v<RecordBytes>, "one owner");
static_assert(std::is_nothrow_move_constructible_v<RecordBytes>);

TEST(RecordBytes, OwnedBytesAreFreedWithTheirOwner)
{
    std::size_t before = in_use();
    {
        char* block;
        RecordBytes bytes = make_owned(block);
        EXPECT_TRUE(bytes.owns());
        EXPECT_EQ(bytes.view().data(), block + block_size / 4);
        EXPECT_EQ(bytes.view().size(), block_size / 2);
        EXPECT_GE(in_use(), before + block_size);
    }
    EXPECT_LT(in_use(), before + block_size);
}

TEST(RecordBytes, MovingHandsTheBytesOnAndLeavesNothingBehind)
{
    std::size_t before = in_use();
    char* block;
    RecordBytes first = make_owned(block);
    std::string_view seen = first.view();
    {
        RecordBytes second = std::move(first);
        EXPECT_FALSE(first.owns());
        EXPECT_TRUE(first.view().empty());
        EXPECT_TRUE(second.owns());
        EXPECT_EQ(second.view(), seen);
        EXPECT_GE(in_use(), before + block_size);
    }
    EXPECT_LT(in_use(), before + block_size);  // freed once, by the last holder
}

TEST(RecordBytes, MoveAssignmentFreesWhatItReplaces)
{
    std::size_t before = in_use();
    char* a;
    char* b;
    RecordBytes kept = make_owned(a);
    RecordBytes other = make_owned(b);
    EXPECT_GE(in_use(), before + 2 * block_size);
    kept = std::move(other);
    EXPECT_LT(in_use(), before + 2 * block_size);
    EXPECT_EQ(kept.view().data(), b + block_size / 4);
    kept = RecordBytes::borrowed("marker");
    EXPECT_LT(in_use(), before + block_size);
    EXPECT_FALSE(kept.owns());
}

TEST(RecordBytes, ReleaseGivesTheBlockUp)
{
    std::size_t before = in_use();
    char* block;
    RecordBytes bytes = make_owned(block);
    char* released = bytes.release();
    EXPECT_EQ(released, block);
    EXPECT_FALSE(bytes.owns());
    EXPECT_TRUE(bytes.view().empty());
    {
        RecordBytes gone = std::move(bytes);  // nothing left to free
    }
    EXPECT_GE(in_use(), before + block_size);  // the caller frees it now
    std::free(released);
    EXPECT_LT(in_use(), before + block_size);
}

TEST(RecordBytes, BorrowedBytesAreNeverFreed)
{
    char stack[16] = "a marker";
    RecordBytes bytes = RecordBytes::borrowed({stack, 8});
    EXPECT_FALSE(bytes.owns());
    EXPECT_EQ(bytes.view(), "a marker");
    EXPECT_EQ(bytes.release(), nullptr);
    RecordBytes none = RecordBytes::owned(nullptr, {stack, 8});  // nothing to take over
    EXPECT_FALSE(none.owns());
}

TEST(RecordBytes, EmptyByDefault)
{
    RecordBytes bytes;
    EXPECT_FALSE(bytes.owns());
    EXPECT_TRUE(bytes.view().empty());
}

}  // namespace
