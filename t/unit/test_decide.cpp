// test_decide.cpp — what a request gets from the reply to its claim: the
// reply parsed by hiredis itself from RESP bytes (so the test sees exactly
// the structures the module will), read by redis/replies.hpp and
// decided by decide.hpp; and outcome.hpp's table.
#include <gtest/gtest.h>

#include <hiredis/hiredis.h>

#include <string>

#include "decide.hpp"
#include "redis/replies.hpp"

namespace {

using idem::Outcome;
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

// What the Redis store makes of the reply to SET ... NX PX GET.
Outcome decide(const redisReply* reply, const Digest& fingerprint, Record& record, idem::Unusable& why)
{
    std::string_view found;
    why = idem::Unusable::no;
    switch (idem::redis::read_claim_reply(reply, found)) {
    case idem::redis::ClaimReply::granted: return Outcome::fresh;
    case idem::redis::ClaimReply::unusable: return Outcome::unavailable;
    case idem::redis::ClaimReply::found: break;
    }
    return idem::decide_stored(found, fingerprint, record, why);
}

Outcome decide_resp(const std::string& resp, idem::Unusable* why_out = nullptr)
{
    ParsedReply reply(resp);
    Record record{};
    idem::Unusable why;
    Outcome outcome = decide(reply.get(), ours, record, why);
    if (why_out != nullptr) {
        *why_out = why;
    }
    return outcome;
}

TEST(Decide, NoReplyIsUnavailable)
{
    Record record{};
    idem::Unusable why;
    EXPECT_EQ(decide(nullptr, ours, record, why), Outcome::unavailable);
}

TEST(Decide, NilMeansTheClaimIsOurs)
{
    EXPECT_EQ(decide_resp("$-1\r\n"), Outcome::fresh);
}

TEST(Decide, ErrorIsUnavailable)
{
    EXPECT_EQ(decide_resp("-ERR x\r\n"), Outcome::unavailable);
    EXPECT_EQ(decide_resp("-LOADING Redis is loading\r\n"), Outcome::unavailable);
}

TEST(Decide, UnexpectedReplyTypesAreUnavailable)
{
    EXPECT_EQ(decide_resp(":1\r\n"), Outcome::unavailable);
    EXPECT_EQ(decide_resp("+OK\r\n"), Outcome::unavailable);
    EXPECT_EQ(decide_resp("*1\r\n" + bulk(claim(ours))), Outcome::unavailable);
    EXPECT_EQ(decide_resp("*0\r\n"), Outcome::unavailable);
}

TEST(Decide, UnreadableStringIsNotARecord)
{
    for (const std::string& value : {std::string(), std::string("hello"), std::string("IX")}) {
        idem::Unusable why = idem::Unusable::no;
        EXPECT_EQ(decide_resp(bulk(value), &why), Outcome::unavailable);
        EXPECT_EQ(why, idem::Unusable::not_a_record);
    }
}

// A record of ours cut short or extended is one that does not open: 410,
// never 503 (which a client retries for the whole idempotency_ttl).
TEST(Decide, ARecordCutShortIsUnverifiable)
{
    const std::string record = response(ours);
    for (const std::string& value : {std::string("IDM"), record.substr(0, 4), record.substr(0, record.size() - 1),
                                     record + "x", claim(ours).substr(0, 20)}) {
        idem::Unusable why = idem::Unusable::no;
        EXPECT_EQ(decide_resp(bulk(value), &why), Outcome::unverifiable) << testing::PrintToString(value);
        EXPECT_EQ(why, idem::Unusable::damaged);
    }
}

TEST(Decide, ClaimWithOurFingerprintIsInFlight)
{
    EXPECT_EQ(decide_resp(bulk(claim(ours))), Outcome::conflict);
}

TEST(Decide, OtherFingerprintIsMismatchForEveryKind)
{
    EXPECT_EQ(decide_resp(bulk(claim(theirs))), Outcome::mismatch);
    EXPECT_EQ(decide_resp(bulk(response(theirs))), Outcome::mismatch);
    EXPECT_EQ(decide_resp(bulk(unreplayable(theirs))), Outcome::mismatch);
}

TEST(Decide, UnreplayableWithOurFingerprint)
{
    EXPECT_EQ(decide_resp(bulk(unreplayable(ours))), Outcome::unreplayable);
}

// A marker that says why hands the request what it says (its 410 tells it).
TEST(Decide, UnreplayableMarkerSaysWhy)
{
    std::string said(idem::unreplayable_why_size, '\0');
    said.resize(idem::encode_unreplayable(ours, 101, idem::MarkerWhy::bad_status, said.data()));
    Record record{};
    idem::Unusable why = idem::Unusable::no;
    EXPECT_EQ(idem::decide_stored(said, ours, record, why), Outcome::unreplayable);
    EXPECT_EQ(why, idem::Unusable::no);
    EXPECT_EQ(record.kind, idem::RecordKind::unreplayable);
    EXPECT_EQ(record.why, idem::MarkerWhy::bad_status);
    EXPECT_EQ(record.status, 101);
    EXPECT_EQ(idem::decide_stored(said, theirs, record, why), Outcome::mismatch);
    record = Record{};
    EXPECT_EQ(idem::decide_stored(unreplayable(ours), ours, record, why), Outcome::unreplayable);
    EXPECT_EQ(record.why, idem::MarkerWhy::unsaid);
}

TEST(Decide, StoredResponseIsReplayedWithRecordFilled)
{
    ParsedReply reply(bulk(response(ours)));
    Record record{};
    idem::Unusable why;
    ASSERT_EQ(decide(reply.get(), ours, record, why), Outcome::replayed);
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

TEST(Decide, ARecordMovesWithACopyOfItsBytes)
{
    const std::string bytes = response(ours);
    auto record = idem::decode_record(bytes);
    ASSERT_TRUE(record);
    std::string copy = bytes;
    Record moved = idem::rebased(*record, bytes, copy.data());
    copy.replace(copy.find(stored_body), stored_body.size(), std::string(stored_body.size(), 'X'));
    EXPECT_EQ(moved.body, std::string(stored_body.size(), 'X'));
    EXPECT_EQ(moved.status, 201);
    idem::HeaderReader headers(moved);
    idem::Header header;
    ASSERT_TRUE(headers.next(header));
    EXPECT_EQ(header.name, "Content-Type");
    EXPECT_GE(header.name.data(), copy.data());
    EXPECT_LT(header.name.data(), copy.data() + copy.size());
}

// A response no gateway of ours stored (written to Redis by someone else)
// is never replayed: 410, as a record that fails its integrity check.
TEST(Decide, AResponseThatMustNotBeSentAgainIsUnverifiable)
{
    struct Case {
        std::uint16_t status;
        idem::Header header;
        idem::Unusable why;
    };
    const Case cases[] = {
        {700, {"X-A", "b"}, idem::Unusable::bad_status},
        {200, {"X A", "b"}, idem::Unusable::bad_header_name},
        {200, {"X-A", "b\r\nSet-Cookie: s=1"}, idem::Unusable::bad_header_value},
    };
    for (const Case& c : cases) {
        std::string out(idem::response_size(&c.header, 1, 1), '\0');
        char* body_at = idem::encode_response_head(out.data(), ours, c.status, &c.header, 1, 1);
        *body_at = 'x';
        Record record{};
        idem::Unusable why = idem::Unusable::no;
        EXPECT_EQ(idem::decide_stored(out, ours, record, why), Outcome::unverifiable);
        EXPECT_EQ(why, c.why);
        EXPECT_NE(std::string(idem::unusable_reason(why)).find("never replayed"), std::string::npos);
        // whoever's fingerprint it carries
        EXPECT_EQ(idem::decide_stored(out, theirs, record, why), Outcome::unverifiable);
    }
}

// A record of a later release's layout (a version above this release's):
// never replayed as garbage, never executed again for — 410, whatever the
// rest of its bytes, a claim's kind byte included.
TEST(Decide, ARecordOfALaterReleaseIsUnverifiable)
{
    // (version 3 is a compressed record: test_compression.cpp; version 4
    // one kept in pieces: test_pieces.cpp; version 5 a marker that says why)
    for (std::string value : {response(ours), std::string("IDM\x06"), std::string("IDM\x09\x01garbage")}) {
        if (value.size() > 4) {
            value[3] = value[3] == '\x01' ? '\x06' : value[3];
        }
        Record record{};
        idem::Unusable why = idem::Unusable::no;
        EXPECT_EQ(idem::decide_stored(value, ours, record, why), Outcome::unverifiable)
            << testing::PrintToString(value);
        EXPECT_EQ(why, idem::Unusable::newer_version);
        EXPECT_NE(std::string(idem::unusable_reason(why)).find("later release"), std::string::npos);
    }
    // version 0, with our magic: a record of ours, damaged
    std::string zero = response(ours);
    zero[3] = '\0';
    idem::Unusable why = idem::Unusable::no;
    Record record{};
    EXPECT_EQ(idem::decide_stored(zero, ours, record, why), Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::damaged);
}

// outcome.hpp: each outcome's name ($idempotency_status), status and problem.
TEST(Outcomes, TheModulesOwnAnswers)
{
    struct Row {
        Outcome outcome;
        const char* name;
        unsigned status;
        unsigned retry_after;
        const char* type;
    };
    const Row rows[] = {
        {Outcome::none, "", 0, 0, ""},
        {Outcome::fresh, "new", 0, 0, ""},
        {Outcome::replayed, "replayed", 0, 0, ""},
        {Outcome::waited, "waited", 0, 0, ""},
        {Outcome::conflict, "conflict", 409, 1, "request-in-progress"},
        {Outcome::mismatch, "mismatch", 422, 0, "key-reused"},
        {Outcome::invalid, "invalid", 400, 0, "invalid-key"},
        {Outcome::missing, "missing", 400, 0, "missing-key"},
        {Outcome::unavailable, "unavailable", 503, 1, "store-unavailable"},
        {Outcome::released, "released", 0, 0, ""},
        {Outcome::unreplayable, "unreplayable", 410, 0, "response-not-replayable"},
        {Outcome::unverifiable, "unreplayable", 410, 0, "response-unverifiable"},
        {Outcome::joined, "joined", 0, 0, ""},
        {Outcome::unreadable, "invalid", 400, 0, "body-unreadable"},
    };
    ASSERT_EQ(sizeof(rows) / sizeof(rows[0]), idem::outcome_count);
    for (const Row& row : rows) {
        const idem::OutcomeInfo& info = idem::outcome_info(row.outcome);
        EXPECT_EQ(info.name, row.name);
        EXPECT_EQ(info.http_status, row.status);
        EXPECT_EQ(info.retry_after, row.retry_after);
        EXPECT_EQ(info.problem.type, row.type);
        EXPECT_EQ(info.problem.title.empty(), row.status == 0);
    }
    EXPECT_EQ(idem::outcome_info(Outcome::unverifiable).counted_as, Outcome::unreplayable);
    EXPECT_EQ(idem::outcome_info(Outcome::unreadable).counted_as, Outcome::invalid);
    EXPECT_EQ(idem::outcome_info(Outcome::conflict).counted_as, Outcome::conflict);
}

}  // namespace
