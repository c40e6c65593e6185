// test_claim_token.cpp — the claim's token: unique first, then who holds
// the claim, read back for the operator's inspection; and the fenced
// claim's reply, whose granted form is Redis's clock.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "claim_token.hpp"
#include "redis/replies.hpp"

namespace {

using idem::Holder;

const unsigned char unique[idem::token_unique_length] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

std::string token_of(const Holder& holder)
{
    std::string out(idem::claim_token_size(holder), '\0');
    out.resize(idem::encode_claim_token(unique, holder, out.data()));
    return out;
}

TEST(ClaimToken, TheHolderReadsBack)
{
    Holder holder{"gw-1.example.net", 4242, 1795695112663ULL, 30000};
    std::string token = token_of(holder);
    ASSERT_EQ(token.size(), idem::claim_token_size(holder));
    EXPECT_EQ(0, std::memcmp(token.data(), unique, sizeof unique));
    auto read = idem::read_holder(token);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->host, "gw-1.example.net");
    EXPECT_EQ(read->pid, 4242u);
    EXPECT_EQ(read->claimed_at_ms, 1795695112663ULL);
    EXPECT_EQ(read->lock_ttl_ms, 30000u);
}

TEST(ClaimToken, ALongHostIsCut)
{
    std::string host(300, 'h');
    Holder holder{host, 1, 2, 3};
    std::string token = token_of(holder);
    auto read = idem::read_holder(token);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->host.size(), idem::max_holder_host);
    EXPECT_LE(token.size(), std::size_t{255});  // a claim record's token fits its one length byte
}

TEST(ClaimToken, AnEmptyHost)
{
    auto read = idem::read_holder(token_of({"", 7, 8, 9}));
    ASSERT_TRUE(read);
    EXPECT_TRUE(read->host.empty());
    EXPECT_EQ(read->pid, 7u);
}

TEST(ClaimToken, TokensWithoutAHolderTellNone)
{
    EXPECT_FALSE(idem::read_holder(std::string(reinterpret_cast<const char*>(unique), sizeof unique)));  // an older release's
    EXPECT_FALSE(idem::read_holder("another gateway"));
    EXPECT_FALSE(idem::read_holder(""));
    std::string token = token_of({"gw", 1, 2, 3});
    EXPECT_FALSE(idem::read_holder(token.substr(0, token.size() - 1)));  // cut short
    EXPECT_FALSE(idem::read_holder(token + "x"));                         // trailing bytes
    token[idem::token_unique_length] = 'X';
    EXPECT_FALSE(idem::read_holder(token));                               // not the holder's mark
}

// hiredis replies built by hand.
redisReply string_reply(const char* s)
{
    redisReply r{};
    r.type = REDIS_REPLY_STRING;
    r.str = const_cast<char*>(s);
    r.len = std::strlen(s);
    return r;
}

TEST(FencedClaimReply, GrantedIsRedisClockInMicroseconds)
{
    redisReply sec = string_reply("1795695112");
    redisReply usec = string_reply("663784");
    redisReply* parts[] = {&sec, &usec};
    redisReply time{};
    time.type = REDIS_REPLY_ARRAY;
    time.elements = 2;
    time.element = parts;
    std::string_view found;
    std::uint64_t fence = 0;
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&time, found, fence), idem::redis::ClaimReply::granted);
    EXPECT_EQ(fence, 1795695112663784ULL);

    usec = string_reply("1000000");  // not a microsecond count
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&time, found, fence), idem::redis::ClaimReply::unusable);
    usec = string_reply("12a");
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&time, found, fence), idem::redis::ClaimReply::unusable);
    time.elements = 1;
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&time, found, fence), idem::redis::ClaimReply::unusable);
}

TEST(FencedClaimReply, FoundIsTheRecordAndNilIsNeverGranted)
{
    redisReply record = string_reply("IDM\x01\x02...");
    std::string_view found;
    std::uint64_t fence = 0;
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&record, found, fence), idem::redis::ClaimReply::found);
    EXPECT_EQ(found, "IDM\x01\x02...");
    redisReply nil{};
    nil.type = REDIS_REPLY_NIL;
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(&nil, found, fence), idem::redis::ClaimReply::unusable);
    EXPECT_EQ(idem::redis::read_fenced_claim_reply(nullptr, found, fence), idem::redis::ClaimReply::unusable);
    EXPECT_EQ(fence, 0u);
}

}  // namespace
