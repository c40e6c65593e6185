// test_outcome.cpp — decide() on replies parsed by hiredis itself from RESP
// bytes, so the test sees exactly the structures the module will.
#include <gtest/gtest.h>

#include <hiredis/hiredis.h>

#include <string>

#include "outcome.hpp"

namespace {

using idem::Decision;
using idem::Digest;
using idem::Record;

// Owns the reply hiredis builds from one RESP frame.
class ParsedReply {
public:
    explicit ParsedReply(const std::string& resp)
    {
        redisReader* reader = redisReaderCreate();
        EXPECT_NE(reader, nullptr);
        if (reader == nullptr) {
            return;
        }
        EXPECT_EQ(redisReaderFeed(reader, resp.data(), resp.size()), REDIS_OK);
        EXPECT_EQ(redisReaderGetReply(reader, &reply_), REDIS_OK);
        EXPECT_NE(reply_, nullptr) << "incomplete RESP frame";
        redisReaderFree(reader);
    }
    ~ParsedReply()
    {
        if (reply_ != nullptr) {
            freeReplyObject(reply_);
        }
    }
    ParsedReply(const ParsedReply&) = delete;
    ParsedReply& operator=(const ParsedReply&) = delete;

    const redisReply* get() const { return static_cast<const redisReply*>(reply_); }

private:
    void* reply_ = nullptr;
};

std::string bulk(const std::string& payload)
{
    return "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
}

Digest digest_of(std::uint8_t value)
{
    Digest digest;
    digest.fill(value);
    return digest;
}

const Digest ours = digest_of(0xaa);
const Digest theirs = digest_of(0xbb);

std::string claim(const Digest& fp)
{
    std::string out(idem::claim_size("token"), '\0');
    idem::encode_claim(fp, "token", out.data());
    return out;
}

const std::string stored_body("ok\0\r\nbody", 9);

std::string response(const Digest& fp)
{
    const idem::Header headers[] = {{"Content-Type", "text/plain"}, {"Set-Cookie", "a=1"}};
    std::string out(idem::response_size(headers, 2, stored_body.size()), '\0');
    char* body_at = idem::encode_response_head(out.data(), fp, 201, headers, 2, stored_body.size());
    stored_body.copy(body_at, stored_body.size());
    return out;
}

std::string unreplayable(const Digest& fp)
{
    std::string out(idem::unreplayable_size, '\0');
    idem::encode_unreplayable(fp, 200, out.data());
    return out;
}

Decision decide_resp(const std::string& resp)
{
    ParsedReply reply(resp);
    Record record{};
    return idem::decide(reply.get(), ours, record);
}

TEST(Decide, NoReplyIsUnavailable)
{
    Record record{};
    EXPECT_EQ(idem::decide(nullptr, ours, record), Decision::unavailable);
}

TEST(Decide, NilMeansTheClaimIsOurs)
{
    EXPECT_EQ(decide_resp("$-1\r\n"), Decision::execute);
}

TEST(Decide, ErrorIsUnavailable)
{
    EXPECT_EQ(decide_resp("-ERR x\r\n"), Decision::unavailable);
    EXPECT_EQ(decide_resp("-LOADING Redis is loading\r\n"), Decision::unavailable);
}

TEST(Decide, UnexpectedReplyTypesAreUnavailable)
{
    EXPECT_EQ(decide_resp(":1\r\n"), Decision::unavailable);
    EXPECT_EQ(decide_resp("+OK\r\n"), Decision::unavailable);
    EXPECT_EQ(decide_resp("*1\r\n" + bulk(claim(ours))), Decision::unavailable);
    EXPECT_EQ(decide_resp("*0\r\n"), Decision::unavailable);
}

TEST(Decide, UnreadableStringIsCorrupt)
{
    EXPECT_EQ(decide_resp(bulk("")), Decision::corrupt);
    EXPECT_EQ(decide_resp(bulk("hello")), Decision::corrupt);
    const std::string record = response(ours);
    EXPECT_EQ(decide_resp(bulk(record.substr(0, record.size() - 1))), Decision::corrupt);
    EXPECT_EQ(decide_resp(bulk(record + "x")), Decision::corrupt);
}

TEST(Decide, ClaimWithOurFingerprintIsInFlight)
{
    EXPECT_EQ(decide_resp(bulk(claim(ours))), Decision::in_flight);
}

TEST(Decide, OtherFingerprintIsMismatchForEveryKind)
{
    EXPECT_EQ(decide_resp(bulk(claim(theirs))), Decision::mismatch);
    EXPECT_EQ(decide_resp(bulk(response(theirs))), Decision::mismatch);
    EXPECT_EQ(decide_resp(bulk(unreplayable(theirs))), Decision::mismatch);
}

TEST(Decide, UnreplayableWithOurFingerprint)
{
    EXPECT_EQ(decide_resp(bulk(unreplayable(ours))), Decision::unreplayable);
}

TEST(Decide, StoredResponseIsReplayedWithRecordFilled)
{
    ParsedReply reply(bulk(response(ours)));
    Record record{};
    ASSERT_EQ(idem::decide(reply.get(), ours, record), Decision::replay);
    EXPECT_EQ(record.kind, idem::RecordKind::response);
    EXPECT_EQ(record.fingerprint, ours);
    EXPECT_EQ(record.status, 201);
    EXPECT_EQ(record.body, stored_body);

    idem::HeaderReader headers(record);
    idem::Header header;
    ASSERT_TRUE(headers.next(header));
    EXPECT_EQ(header.name, "Content-Type");
    EXPECT_EQ(header.value, "text/plain");
    ASSERT_TRUE(headers.next(header));
    EXPECT_EQ(header.name, "Set-Cookie");
    EXPECT_EQ(header.value, "a=1");
    EXPECT_FALSE(headers.next(header));
}

}  // namespace
