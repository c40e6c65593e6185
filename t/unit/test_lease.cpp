// test_lease.cpp — lease.hpp: until when a claim surely holds; and how the
// Redis store reads the reply to a store sent within it (redis/replies.hpp),
// parsed by hiredis from RESP bytes.
#include <gtest/gtest.h>

#include <hiredis/hiredis.h>

#include <string>

#include "lease.hpp"
#include "redis/replies.hpp"

namespace {

using idem::redis::LeasedStore;

TEST(Lease, EndsBeforeTheClaimCanExpireByTheMargin)
{
    // lock_ttl 30 s, redis_timeout 1 s: margin 1 s + 3 s.
    EXPECT_EQ(idem::lease_margin(30000, 1000), 4000u);
    EXPECT_EQ(idem::lease_end(500, 30000, 1000), 500u + 26000u);
}

TEST(Lease, NoLeaseWhenTheMarginEatsTheLockTtl)
{
    EXPECT_EQ(idem::lease_end(500, 1000, 1000), 500u);  // margin 1100 > 1000
    EXPECT_EQ(idem::lease_end(500, 1100, 1000), 500u);  // margin 1110 > 1100
    EXPECT_EQ(idem::lease_end(500, 2000, 500), 500u + 1300u);
}

LeasedStore read(const std::string& resp, std::string* found_out = nullptr)
{
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    redisReaderFree(reader);
    std::string_view found;
    LeasedStore what = idem::redis::read_leased_store_reply(static_cast<redisReply*>(reply), "CLAIM", "RECORD", found);
    if (found_out != nullptr) {
        found_out->assign(found);
    }
    freeReplyObject(reply);
    return what;
}

TEST(LeasedStoreReply, OurClaimOrOurRecordMeansStored)
{
    EXPECT_EQ(read("$5\r\nCLAIM\r\n"), LeasedStore::stored);
    EXPECT_EQ(read("$6\r\nRECORD\r\n"), LeasedStore::stored);  // sent again after a lost reply
}

TEST(LeasedStoreReply, NilMeansTheClaimWasGoneAndNothingWritten)
{
    EXPECT_EQ(read("$-1\r\n"), LeasedStore::gone);
}

TEST(LeasedStoreReply, AnythingElseWasAnotherRequestsAndIsHandedBack)
{
    std::string found;
    EXPECT_EQ(read("$5\r\nOTHER\r\n", &found), LeasedStore::not_ours);
    EXPECT_EQ(found, "OTHER");
    EXPECT_EQ(read("$6\r\nCLAIMX\r\n"), LeasedStore::not_ours);
}

TEST(LeasedStoreReply, ErrorsAndOtherTypesTellNothing)
{
    EXPECT_EQ(read("-OOM command not allowed\r\n"), LeasedStore::unusable);
    EXPECT_EQ(read(":1\r\n"), LeasedStore::unusable);
    EXPECT_EQ(read("+OK\r\n"), LeasedStore::unusable);
    std::string_view found;
    EXPECT_EQ(idem::redis::read_leased_store_reply(nullptr, "C", "R", found), LeasedStore::unusable);
}

}  // namespace
