// test_key.cpp — key parsing (docs/design.md#key-syntax) (bare and RFC 8941 sf-string
// forms) and Redis key derivation.
#include <gtest/gtest.h>

#include <string>

#include "key.hpp"

namespace {

using idem::KeyStatus;

struct Parsed {
    KeyStatus status;
    std::string key;
};

Parsed parse(std::string_view value)
{
    std::string out(value.size(), '\0');
    const idem::ParsedKey parsed = idem::parse_key(value, out.data());
    if (parsed.status == KeyStatus::ok) {
        out.resize(parsed.length);
    } else {
        EXPECT_EQ(parsed.length, 0u);
        out.clear();
    }
    return {parsed.status, out};
}

void expect_key(std::string_view value, std::string_view key)
{
    const Parsed parsed = parse(value);
    EXPECT_EQ(parsed.status, KeyStatus::ok) << "value: " << value;
    EXPECT_EQ(parsed.key, key) << "value: " << value;
}

void expect_status(std::string_view value, KeyStatus status)
{
    EXPECT_EQ(parse(value).status, status) << "value: " << value;
}

std::string derive(std::string_view prefix, std::string_view scope, std::string_view key)
{
    std::string out(prefix.size() + idem::key_hash_hex_length, '?');
    const std::size_t length = idem::derive_redis_key(prefix, scope, key, out.data());
    EXPECT_EQ(length, out.size());
    return out;
}

TEST(ParseKey, BareVisibleAscii)
{
    expect_key("abc", "abc");
    expect_key("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324");
    expect_key("a", "a");
}

TEST(ParseKey, BareAcceptsEveryVisibleByteIncludingQuoteInside)
{
    std::string all;
    for (int c = 0x21; c <= 0x7e; ++c) {
        all.push_back(static_cast<char>(c));
    }
    expect_key(all, all);  // starts with '!', so bare even though it holds '"'
    expect_key("a\"b", "a\"b");
    expect_key("a\\b", "a\\b");
    expect_key("abc\"", "abc\"");
}

TEST(ParseKey, BareRefusesSpaceControlDelAndHighBytes)
{
    expect_status("a b", KeyStatus::invalid);
    expect_status(" abc", KeyStatus::invalid);
    expect_status("abc ", KeyStatus::invalid);
    expect_status("a\tb", KeyStatus::invalid);
    expect_status("a\x7f", KeyStatus::invalid);
    expect_status("a\x80", KeyStatus::invalid);
    expect_status("\xff", KeyStatus::invalid);
    expect_status("caf\xc3\xa9", KeyStatus::invalid);
    expect_status(std::string_view("a\0b", 3), KeyStatus::invalid);
    expect_status("a\r\nb", KeyStatus::invalid);
}

TEST(ParseKey, Empty)
{
    expect_status("", KeyStatus::empty);
    expect_status("\"\"", KeyStatus::empty);
}

TEST(ParseKey, BareLengthLimit)
{
    expect_key(std::string(255, 'k'), std::string(255, 'k'));
    expect_status(std::string(256, 'k'), KeyStatus::too_long);
    expect_status(std::string(10000, 'k'), KeyStatus::too_long);
}

TEST(ParseKey, BadBytesWinOverLength)
{
    expect_status(std::string(300, 'k') + " ", KeyStatus::invalid);
}

TEST(ParseKey, SfStringNamesTheSameKeyAsBare)
{
    expect_key("\"abc\"", "abc");
    EXPECT_EQ(parse("\"abc\"").key, parse("abc").key);
    EXPECT_EQ(derive("idem:", "s", parse("\"abc\"").key), derive("idem:", "s", parse("abc").key));
}

TEST(ParseKey, SfStringEscapes)
{
    expect_key(R"("a\"b")", "a\"b");
    expect_key(R"("a\\b")", "a\\b");
    expect_key(R"("\\")", "\\");
    expect_key(R"("\"")", "\"");
    expect_key(R"("\\\"\\")", "\\\"\\");
    // The unquoted form of an escape equals the bare spelling.
    EXPECT_EQ(parse(R"("a\"b")").key, parse("a\"b").key);
}

TEST(ParseKey, SfStringRefusesOtherEscapes)
{
    expect_status(R"("a\nb")", KeyStatus::invalid);
    expect_status(R"("\a")", KeyStatus::invalid);
    expect_status(R"("\ ")", KeyStatus::invalid);
    expect_status(R"("\'")", KeyStatus::invalid);
    expect_status(R"("\x41")", KeyStatus::invalid);
}

TEST(ParseKey, SfStringRefusesUnterminated)
{
    expect_status("\"", KeyStatus::invalid);
    expect_status("\"abc", KeyStatus::invalid);
    expect_status(R"("abc\")", KeyStatus::invalid);  // closing quote escaped
    expect_status(R"("abc\)", KeyStatus::invalid);   // dangling backslash
}

TEST(ParseKey, SfStringRefusesUnescapedQuoteAndTrailingBytes)
{
    expect_status(R"("a"b")", KeyStatus::invalid);
    expect_status(R"("abc"x)", KeyStatus::invalid);
    expect_status(R"("abc" )", KeyStatus::invalid);
    expect_status(R"("abc"")", KeyStatus::invalid);
    expect_status(R"("""")", KeyStatus::invalid);
}

TEST(ParseKey, SfStringRefusesParameters)
{
    expect_status(R"("abc";a=1)", KeyStatus::invalid);
    expect_status(R"("abc";a)", KeyStatus::invalid);
    expect_status(R"("abc";)", KeyStatus::invalid);
}

TEST(ParseKey, SfStringAllowsSpaceButNotControlDelOrHighBytes)
{
    expect_key("\"a b\"", "a b");
    expect_key("\" \"", " ");
    expect_key("\"  lead and trail  \"", "  lead and trail  ");
    expect_status("\"a\tb\"", KeyStatus::invalid);
    expect_status("\"a\x7f\"", KeyStatus::invalid);
    expect_status("\"a\x80\"", KeyStatus::invalid);
    expect_status("\"\xc3\xa9\"", KeyStatus::invalid);
    expect_status(std::string_view("\"a\0\"", 4), KeyStatus::invalid);
}

TEST(ParseKey, SfStringLengthCountsUnquotedBytes)
{
    // 255 unquoted bytes spelled with 2 + 2 * 255 bytes: still fits.
    std::string escaped_255 = "\"";
    for (int i = 0; i < 255; ++i) {
        escaped_255 += "\\\\";
    }
    escaped_255 += "\"";
    ASSERT_GT(escaped_255.size(), idem::max_key_length);
    expect_key(escaped_255, std::string(255, '\\'));

    std::string escaped_256 = "\"";
    for (int i = 0; i < 256; ++i) {
        escaped_256 += "\\\"";
    }
    escaped_256 += "\"";
    expect_status(escaped_256, KeyStatus::too_long);

    expect_key("\"" + std::string(255, 'k') + "\"", std::string(255, 'k'));
    expect_status("\"" + std::string(256, 'k') + "\"", KeyStatus::too_long);
}

TEST(DeriveRedisKey, KnownVector)
{
    // printf '%s' '5:scopekey' | sha256sum
    EXPECT_EQ(derive("idem:", "scope", "key"),
              "idem:5822dc516e7e866e17f683bbbf8afb380a28a02252aed5897d5e5bab85debe94");
    // printf '%s' '0:key' | sha256sum
    EXPECT_EQ(derive("", "", "key"),
              "68ff685777bd382c20125d59518d4ffb5812dab0f53647c10af751b2dd7b62b2");
    // printf '%s' '12:abcdefghijklk1' | sha256sum — multi-digit length
    EXPECT_EQ(derive("p", "abcdefghijkl", "k1"),
              "p3fdde42907050c48cace186ddbb89bc1d599349500ab19c281d960936233e1bf");
}

TEST(DeriveRedisKey, ScopesNeverCollide)
{
    EXPECT_NE(derive("i:", "a", "bc"), derive("i:", "ab", "c"));
    EXPECT_NE(derive("i:", "", "abc"), derive("i:", "abc", ""));
    EXPECT_NE(derive("i:", "s1", "k"), derive("i:", "s2", "k"));
    EXPECT_EQ(derive("i:", "s", "k"), derive("i:", "s", "k"));
}

TEST(DeriveRedisKey, RawKeyNeverAppears)
{
    const std::string derived = derive("idem:", "scope", "secret-key-value");
    EXPECT_EQ(derived.find("secret"), std::string::npos);
    EXPECT_EQ(derived.rfind("idem:", 0), 0u);
    for (char c : derived.substr(5)) {
        EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << c;
    }
}

}  // namespace
