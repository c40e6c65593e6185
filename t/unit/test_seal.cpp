// Encryption at rest: round trips, rotation, and every way a record that was
// tampered with, moved to another key or sealed under an unknown key is refused.
#include <gtest/gtest.h>

#include <string>

#include "seal.hpp"

namespace {

idem::SecretKey key_from(char fill)
{
    idem::SecretKey k{};
    EXPECT_TRUE(idem::parse_secret_key(std::string(32, fill), k));
    return k;
}

std::string sealed(const idem::SecretKey& k, const std::string& aad, const std::string& plain)
{
    std::string out(plain.size() + idem::seal_overhead, '\0');
    EXPECT_TRUE(idem::seal(k, aad, plain, out.data()));
    return out;
}

idem::OpenStatus open(const idem::SecretKey* keys, size_t n, const std::string& aad, const std::string& s,
                      std::string& plain)
{
    plain.assign(s.size(), '\0');
    size_t len = 0;
    idem::OpenStatus st = idem::open_sealed(keys, n, aad, s, plain.data(), len);
    plain.resize(st == idem::OpenStatus::ok ? len : 0);
    return st;
}

TEST(SecretKey, RawAndHexForms)
{
    idem::SecretKey raw{}, hex{};
    ASSERT_TRUE(idem::parse_secret_key(std::string(32, '\x01'), raw));
    EXPECT_FALSE(idem::parse_secret_key(std::string(32, '0') + "\n", hex));  // 33 bytes: neither form
    std::string h;
    for (int i = 0; i < 32; i++) h += "01";
    ASSERT_TRUE(idem::parse_secret_key("  " + h + "\n", hex));
    EXPECT_EQ(raw.bytes, hex.bytes);
    EXPECT_EQ(raw.id, hex.id);
}

TEST(SecretKey, WrongSizesAndNonHexRefused)
{
    idem::SecretKey k{};
    EXPECT_FALSE(idem::parse_secret_key(std::string(31, 'a'), k));
    EXPECT_FALSE(idem::parse_secret_key(std::string(33, 'a'), k));
    EXPECT_FALSE(idem::parse_secret_key(std::string(64, 'g'), k));
    EXPECT_FALSE(idem::parse_secret_key("", k));
}

TEST(Seal, RoundTripHidesThePlaintext)
{
    idem::SecretKey k = key_from('k');
    std::string plain = "IDM\x01\x02 a stored response with a card number 4242424242424242";
    std::string s = sealed(k, "idem:abc", plain);
    EXPECT_TRUE(idem::is_sealed(s));
    EXPECT_EQ(s.find("4242424242424242"), std::string::npos);
    std::string back;
    ASSERT_EQ(open(&k, 1, "idem:abc", s, back), idem::OpenStatus::ok);
    EXPECT_EQ(back, plain);
}

TEST(Seal, EveryFlippedByteIsRefused)
{
    idem::SecretKey k = key_from('k');
    std::string s = sealed(k, "idem:abc", "a response");
    for (size_t i = 8; i < s.size(); i++) {  // past magic and key id: nonce, ciphertext, tag
        std::string t = s;
        t[i] ^= 0x01;
        std::string back;
        EXPECT_EQ(open(&k, 1, "idem:abc", t, back), idem::OpenStatus::invalid) << i;
        EXPECT_TRUE(back.empty());
    }
}

TEST(Seal, ARecordMovedToAnotherKeyIsRefused)
{
    idem::SecretKey k = key_from('k');
    std::string s = sealed(k, "idem:one", "the response of one");
    std::string back;
    EXPECT_EQ(open(&k, 1, "idem:two", s, back), idem::OpenStatus::invalid);
}

TEST(Seal, RotationOpensWithTheOldKeyAndRefusesUnknownKeys)
{
    idem::SecretKey old_key = key_from('o'), new_key = key_from('n'), other = key_from('x');
    std::string s = sealed(old_key, "idem:k", "sealed before the rotation");
    idem::SecretKey ring[] = {new_key, old_key};
    std::string back;
    ASSERT_EQ(open(ring, 2, "idem:k", s, back), idem::OpenStatus::ok);
    EXPECT_EQ(back, "sealed before the rotation");
    EXPECT_EQ(open(&other, 1, "idem:k", s, back), idem::OpenStatus::unknown_key);
}

TEST(Seal, TruncatedOrForeignValuesAreInvalid)
{
    idem::SecretKey k = key_from('k');
    std::string s = sealed(k, "idem:k", "x");
    std::string back;
    EXPECT_EQ(open(&k, 1, "idem:k", s.substr(0, idem::seal_overhead - 1), back), idem::OpenStatus::invalid);
    EXPECT_EQ(open(&k, 1, "idem:k", "IDM\x01\x02 plain record", back), idem::OpenStatus::invalid);
    EXPECT_EQ(open(&k, 1, "idem:k", s.substr(0, s.size() - 1), back), idem::OpenStatus::invalid);
}

TEST(Seal, TwoSealsOfTheSameRecordDiffer)
{
    idem::SecretKey k = key_from('k');
    EXPECT_NE(sealed(k, "idem:k", "same"), sealed(k, "idem:k", "same"));
}

}  // namespace
