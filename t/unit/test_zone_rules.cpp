// The zone store's rules apart from shared memory: expiry, the fences that
// let only a claim's holder store, release or renew (as the Redis store's
// scripts do), the marker kept when a response finds the zone full, and the
// decision on a record read back with encryption at rest.
#include <gtest/gtest.h>

#include <string>

#include "decide.hpp"
#include "record.hpp"
#include "seal.hpp"
#include "zone/zone_rules.hpp"

namespace {

using idem::zone::Fence;

idem::Digest digest(char fill)
{
    idem::Digest d{};
    d.fill(static_cast<std::uint8_t>(fill));
    return d;
}

std::string claim_record(const idem::Digest& fp, const std::string& token)
{
    std::string out(idem::claim_size(token), '\0');
    out.resize(idem::encode_claim(fp, token, out.data()));
    return out;
}

std::string response_record(const idem::Digest& fp, std::uint16_t status, const std::string& body)
{
    idem::Header h{"Content-Type", "text/plain"};
    std::string out(idem::response_size(&h, 1, body.size()), '\0');
    char* p = idem::encode_response_head(out.data(), fp, status, &h, 1, body.size());
    std::copy(body.begin(), body.end(), p);
    return out;
}

TEST(ZoneRules, ExpiredAtItsExpiryTime)
{
    EXPECT_FALSE(idem::zone::expired(1000, 999));
    EXPECT_TRUE(idem::zone::expired(1000, 1000));
    EXPECT_TRUE(idem::zone::expired(1000, 5000));
}

TEST(ZoneRules, OnlyTheClaimsHolderStores)
{
    std::string mine = claim_record(digest('a'), "token-1");
    std::string theirs = claim_record(digest('a'), "token-2");
    std::string record = response_record(digest('a'), 201, "ok");
    EXPECT_EQ(idem::zone::fence_complete(std::string_view(mine), mine, record), Fence::act);
    EXPECT_EQ(idem::zone::fence_complete(std::string_view(record), mine, record), Fence::done);  // sent twice
    EXPECT_EQ(idem::zone::fence_complete(std::string_view(theirs), mine, record), Fence::refused);  // taken over
    EXPECT_EQ(idem::zone::fence_complete(std::nullopt, mine, record), Fence::refused);  // expired
}

TEST(ZoneRules, OnlyTheClaimsHolderReleases)
{
    std::string mine = claim_record(digest('a'), "token-1");
    std::string theirs = claim_record(digest('a'), "token-2");
    EXPECT_EQ(idem::zone::fence_release(std::string_view(mine), mine), Fence::act);
    EXPECT_EQ(idem::zone::fence_release(std::nullopt, mine), Fence::done);
    EXPECT_EQ(idem::zone::fence_release(std::string_view(theirs), mine), Fence::refused);
    std::string stored = response_record(digest('a'), 201, "ok");
    EXPECT_EQ(idem::zone::fence_release(std::string_view(stored), mine), Fence::refused);
}

TEST(ZoneRules, OnlyTheClaimsHolderRenews)
{
    std::string mine = claim_record(digest('a'), "token-1");
    std::string theirs = claim_record(digest('a'), "token-2");
    EXPECT_EQ(idem::zone::fence_renew(std::string_view(mine), mine), Fence::act);
    EXPECT_EQ(idem::zone::fence_renew(std::string_view(theirs), mine), Fence::refused);
    EXPECT_EQ(idem::zone::fence_renew(std::nullopt, mine), Fence::refused);
}

TEST(ZoneRules, FullZoneMarkerIsUnreplayableAndFitsWhereTheClaimWas)
{
    std::string claim = claim_record(digest('f'), std::string(16, 't'));
    std::string record = response_record(digest('f'), 201, std::string(100000, 'b'));
    char marker[idem::unreplayable_size];
    std::size_t size = idem::zone::full_zone_marker(claim, record, marker);
    ASSERT_EQ(size, idem::unreplayable_size);
    EXPECT_LE(size, claim.size());
    idem::Record decoded;
    idem::Unusable why;
    EXPECT_EQ(idem::decide_stored({marker, size}, digest('f'), decoded, why), idem::Outcome::unreplayable);
    EXPECT_EQ(idem::decide_stored({marker, size}, digest('g'), decoded, why), idem::Outcome::mismatch);
    auto parsed = idem::decode_record({marker, size});
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->status, 201);
}

TEST(ZoneRules, FullZoneMarkerOfASealedRecordHasNoStatus)
{
    std::string claim = claim_record(digest('f'), "tok");
    char marker[idem::unreplayable_size];
    std::size_t size = idem::zone::full_zone_marker(claim, "IDE\x01 sealed bytes", marker);
    ASSERT_EQ(size, idem::unreplayable_size);
    EXPECT_EQ(idem::decode_record({marker, size})->status, 0);
}

TEST(ZoneRules, NoMarkerWithoutAClaim)
{
    char marker[idem::unreplayable_size];
    EXPECT_EQ(idem::zone::full_zone_marker("not a record", "", marker), 0u);
    std::string stored = response_record(digest('a'), 201, "ok");
    EXPECT_EQ(idem::zone::full_zone_marker(stored, stored, marker), 0u);
}

// decide_at_rest: what a store that reads records back (the zone) decides.
class AtRest : public ::testing::Test {
protected:
    idem::SecretKey key_{}, other_{};
    void SetUp() override
    {
        ASSERT_TRUE(idem::parse_secret_key(std::string(32, 'k'), key_));
        ASSERT_TRUE(idem::parse_secret_key(std::string(32, 'o'), other_));
    }
    std::string seal_(const idem::SecretKey& k, const std::string& aad, const std::string& plain)
    {
        std::string out(plain.size() + idem::seal_overhead, '\0');
        EXPECT_TRUE(idem::seal(k, aad, plain, out.data()));
        return out;
    }
    idem::Outcome decide(const std::string& value, const idem::SecretKey* keys, size_t n, idem::Unusable& why,
                         std::string& opened, const std::string& key = "idem:k")
    {
        std::string out(value.size(), '\0');
        std::string_view v = value;
        idem::Record record;
        idem::Outcome d = idem::decide_at_rest(key, v, keys, n, digest('a'), out.data(), record, why);
        opened.assign(v);
        return d;
    }
};

TEST_F(AtRest, SealedRecordOpensAndReplays)
{
    std::string plain = response_record(digest('a'), 201, "body");
    idem::Unusable why;
    std::string opened;
    EXPECT_EQ(decide(seal_(key_, "idem:k", plain), &key_, 1, why, opened), idem::Outcome::replayed);
    EXPECT_EQ(why, idem::Unusable::no);
    EXPECT_EQ(opened, plain);
}

TEST_F(AtRest, EveryRecordThatDoesNotOpenIsUnverifiable)
{
    std::string plain = response_record(digest('a'), 201, "body");
    idem::Unusable why;
    std::string opened;
    EXPECT_EQ(decide(seal_(other_, "idem:k", plain), &key_, 1, why, opened), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::unknown_key);
    EXPECT_EQ(decide(seal_(key_, "idem:elsewhere", plain), &key_, 1, why, opened), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::altered);
    EXPECT_EQ(decide(seal_(key_, "idem:k", plain), nullptr, 0, why, opened), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::no_keys);
    EXPECT_EQ(decide(plain, &key_, 1, why, opened), idem::Outcome::unverifiable);
    EXPECT_EQ(why, idem::Unusable::plain);
}

TEST_F(AtRest, ASealedRecordCutShortOrWithItsMagicAlteredIsUnverifiableNotAnotherApplications)
{
    std::string sealed = seal_(key_, "idem:k", response_record(digest('a'), 201, "body"));
    idem::Unusable why;
    std::string opened;
    for (size_t cut : {size_t(4), size_t(20), idem::seal_overhead - 1}) {
        for (size_t n : {size_t(0), size_t(1)}) {  // with or without a key that opens it
            EXPECT_EQ(decide(sealed.substr(0, cut), &key_, n, why, opened), idem::Outcome::unverifiable) << cut;
            EXPECT_EQ(why, idem::Unusable::altered) << cut;
        }
    }
    for (size_t at : {size_t(0), size_t(3)}) {
        std::string altered = sealed;
        altered[at] ^= 0x20;
        EXPECT_EQ(decide(altered, &key_, 1, why, opened), idem::Outcome::unverifiable) << at;
        EXPECT_EQ(why, idem::Unusable::altered) << at;
    }
    // not ours: too short for the magic, or no id of a configured key
    EXPECT_EQ(decide("IDE", &key_, 1, why, opened), idem::Outcome::unavailable);
    std::string foreign(sealed.size(), 'x');
    EXPECT_EQ(decide(foreign, &key_, 1, why, opened), idem::Outcome::unavailable);
    EXPECT_EQ(why, idem::Unusable::not_a_record);
}

TEST_F(AtRest, PlainClaimsAndPlainStoresWithoutKeysAreDecidedAsUsual)
{
    idem::Unusable why;
    std::string opened;
    EXPECT_EQ(decide(claim_record(digest('a'), "t"), &key_, 1, why, opened), idem::Outcome::conflict);
    EXPECT_EQ(why, idem::Unusable::no);
    EXPECT_EQ(decide(response_record(digest('a'), 201, "x"), nullptr, 0, why, opened), idem::Outcome::replayed);
    EXPECT_EQ(decide(response_record(digest('b'), 201, "x"), nullptr, 0, why, opened), idem::Outcome::mismatch);
}

}  // namespace
