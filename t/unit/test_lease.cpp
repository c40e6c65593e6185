// test_lease.cpp — lease.hpp: until when a claim surely holds, and a lease
// revoked for good; and how the Redis store reads the reply to a store sent
// within it (redis/replies.hpp), parsed by hiredis from RESP bytes: what it
// overwrote, until when that would have lived, and whether it meant what
// ours means.
#include <gtest/gtest.h>

#include <hiredis/hiredis.h>

#include <string>

#include "lease.hpp"
#include "record.hpp"
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

TEST(Lease, HoldsUntilItsEndUnlessRevoked)
{
    idem::Lease lease{1000, 1, false};
    EXPECT_TRUE(lease.holds(999));
    EXPECT_FALSE(lease.holds(1000));
    lease.revoke();
    EXPECT_FALSE(lease.holds(0));  // for good: a renewal found the claim gone
}

idem::Digest digest_of(std::uint8_t b)
{
    idem::Digest d{};
    d.fill(b);
    return d;
}

std::string claim_of(std::uint8_t b, const std::string& token = "0123456789abcdef")
{
    std::string out(idem::claim_size(token), '\0');
    out.resize(idem::encode_claim(digest_of(b), token, out.data()));
    return out;
}

std::string marker_of(std::uint8_t b)
{
    std::string out(idem::unreplayable_size, '\0');
    out.resize(idem::encode_unreplayable(digest_of(b), 201, out.data()));
    return out;
}

std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

// The EXEC's reply to MULTI; PEXPIRETIME; SET ... XX GET; EXEC.
std::string exec_reply(long long expires_at, const std::string& old_bulk)
{
    return "*2\r\n:" + std::to_string(expires_at) + "\r\n" + old_bulk;
}

idem::redis::LeasedStoreReply read(const std::string& resp, const std::string& claim = "CLAIM",
                                   std::string* found_out = nullptr)
{
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    redisReaderFree(reader);
    idem::redis::LeasedStoreReply what =
        idem::redis::read_leased_store_reply(static_cast<redisReply*>(reply), claim, "RECORD");
    if (found_out != nullptr) {
        found_out->assign(what.found);
    }
    freeReplyObject(reply);
    return what;
}

TEST(LeasedStoreReply, OurClaimOrOurRecordMeansStored)
{
    EXPECT_EQ(read(exec_reply(1700000000000, bulk("CLAIM"))).what, LeasedStore::stored);
    EXPECT_EQ(read(exec_reply(1700000000000, bulk("RECORD"))).what, LeasedStore::stored);  // sent again
}

TEST(LeasedStoreReply, NilMeansTheClaimWasGoneAndNothingWritten)
{
    EXPECT_EQ(read(exec_reply(-2, "$-1\r\n")).what, LeasedStore::gone);
}

TEST(LeasedStoreReply, AnotherValueIsPutBackWithTheExpiryItHad)
{
    std::string found;
    auto r = read(exec_reply(1700000012345, bulk("OTHER")), "CLAIM", &found);
    EXPECT_EQ(r.what, LeasedStore::not_ours);
    EXPECT_EQ(found, "OTHER");
    EXPECT_EQ(r.expires_at, 1700000012345);
    EXPECT_EQ(read(exec_reply(1, bulk("CLAIMX"))).what, LeasedStore::not_ours);
    // a value without expiry (PEXPIRETIME -1) is put back without one
    EXPECT_EQ(read(exec_reply(-1, bulk("OTHER"))).expires_at, -1);
}

TEST(LeasedStoreReply, AnotherRequestsClaimIsTakenNotPutBack)
{
    // Of our fingerprint or another: put back, it could outlive its
    // request's store and let a retry execute again (docs/design.md#the-lease).
    EXPECT_EQ(read(exec_reply(5, bulk(claim_of(7, "another-token-00"))), claim_of(7)).what, LeasedStore::took_claim);
    EXPECT_EQ(read(exec_reply(5, bulk(claim_of(8, "another-token-00"))), claim_of(7)).what, LeasedStore::took_claim);
    // whatever our own value looks like: what was found decides
    EXPECT_EQ(read(exec_reply(5, bulk(claim_of(8))), "CLAIM").what, LeasedStore::took_claim);
    // our own claim, byte for byte, is ours
    EXPECT_EQ(read(exec_reply(5, bulk(claim_of(7))), claim_of(7)).what, LeasedStore::stored);
    // a stored answer of another fingerprint is still put back
    EXPECT_EQ(read(exec_reply(5, bulk(marker_of(8))), claim_of(7)).what, LeasedStore::not_ours);
}

TEST(LeasedStoreReply, AStoredAnswerOfOurFingerprintMeansWhatOursMeans)
{
    EXPECT_EQ(read(exec_reply(5, bulk(marker_of(7))), claim_of(7)).what, LeasedStore::same_intent);
    EXPECT_EQ(read(exec_reply(5, bulk(marker_of(8))), claim_of(7)).what, LeasedStore::not_ours);
    EXPECT_TRUE(idem::redis::same_intent(claim_of(7), marker_of(7)));
    EXPECT_FALSE(idem::redis::same_intent(claim_of(7), "not a record"));
    EXPECT_FALSE(idem::redis::same_intent("not a claim", marker_of(7)));
}

TEST(LeasedStoreReply, ErrorsAndOtherShapesTellNothing)
{
    EXPECT_EQ(read("-OOM command not allowed\r\n").what, LeasedStore::unusable);
    EXPECT_EQ(read(":1\r\n").what, LeasedStore::unusable);
    EXPECT_EQ(read("+OK\r\n").what, LeasedStore::unusable);
    EXPECT_EQ(read("*-1\r\n").what, LeasedStore::unusable);  // EXEC aborted
    EXPECT_EQ(read("*2\r\n:1\r\n-WRONGTYPE Operation against a key\r\n").what, LeasedStore::unusable);
    EXPECT_EQ(read("*1\r\n:1\r\n").what, LeasedStore::unusable);
    EXPECT_EQ(idem::redis::read_leased_store_reply(nullptr, "C", "R").what, LeasedStore::unusable);
}

// A reply read by `read_with`, freed after.
template <typename Read>
int conditional(const std::string& resp, Read read_with)
{
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    redisReaderFree(reader);
    int answer = read_with(static_cast<redisReply*>(reply));
    freeReplyObject(reply);
    return answer;
}

// SET K R IFEQ C PX ttl GET: the old value says what happened.
TEST(ConditionalWrite, StoreIsDoneWhenItFoundOurClaimOrOurRecord)
{
    auto store = [](const redisReply* r) { return idem::redis::read_conditional_store(r, "CLAIM", "RECORD"); };
    EXPECT_EQ(conditional(bulk("CLAIM"), store), 1);
    EXPECT_EQ(conditional(bulk("RECORD"), store), 1);  // an attempt whose reply was lost stored it
    EXPECT_EQ(conditional("$-1\r\n", store), 0);       // the claim expired
    EXPECT_EQ(conditional(bulk("CLAIMX"), store), 0);  // another value
    EXPECT_EQ(conditional(bulk(""), store), 0);
    EXPECT_EQ(conditional("+OK\r\n", store), -1);      // not the reply to SET ... GET
    EXPECT_EQ(conditional(":1\r\n", store), -1);
    EXPECT_EQ(conditional("-WRONGTYPE x\r\n", store), -1);
    EXPECT_EQ(idem::redis::read_conditional_store(nullptr, "C", "R"), -1);
}

// SET K C IFEQ C PX lock_ttl: OK renewed, nil gone.
TEST(ConditionalWrite, RenewalIsOkOrNil)
{
    auto renewal = [](const redisReply* r) { return idem::redis::read_conditional_renewal(r); };
    EXPECT_EQ(conditional("+OK\r\n", renewal), 1);
    EXPECT_EQ(conditional("$-1\r\n", renewal), 0);
    EXPECT_EQ(conditional("+QUEUED\r\n", renewal), -1);
    EXPECT_EQ(conditional(bulk("OK"), renewal), -1);
    EXPECT_EQ(conditional(":1\r\n", renewal), -1);
    EXPECT_EQ(conditional("-ERR syntax error\r\n", renewal), -1);
}

// DELIFEQ K C, DELEX K IFEQ C: 1 deleted; 0 not, which a release sent again
// after a lost reply counts as done (its first attempt may have deleted it).
TEST(ConditionalWrite, ReleaseDeletedOrNot)
{
    auto first = [](const redisReply* r) { return idem::redis::read_conditional_release(r, false); };
    auto again = [](const redisReply* r) { return idem::redis::read_conditional_release(r, true); };
    EXPECT_EQ(conditional(":1\r\n", first), 1);
    EXPECT_EQ(conditional(":0\r\n", first), 0);
    EXPECT_EQ(conditional(":0\r\n", again), 1);
    EXPECT_EQ(conditional(":2\r\n", first), -1);
    EXPECT_EQ(conditional("$-1\r\n", first), -1);
    EXPECT_EQ(conditional("-ERR unknown command\r\n", again), -1);
}

}  // namespace

