// test_json_canonical.cpp — the canonical forms the fingerprint's body and
// query parts are read as (json_canonical.hpp): RFC 8785's ordering,
// numbers and escapes, chosen and left-out members (RFC 6901), the faults
// of a body that is not what is expected, form fields as a set; and the
// framing of chosen parts (fingerprint_parts.hpp), apart from the default.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fingerprint.hpp"
#include "fingerprint_parts.hpp"
#include "form_fields.hpp"
#include "json_canonical.hpp"

namespace {

using idem::BodyFault;
using idem::JsonPick;

std::string canonical(std::string_view body, JsonPick pick = JsonPick::whole,
                      std::vector<std::string_view> pointers = {}, unsigned depth = 32)
{
    idem::JsonSelection selection{pick, pointers.data(), pointers.size(), depth};
    std::string out;
    BodyFault fault = idem::canonical_json(body, false, selection, out);
    return fault == BodyFault::none ? out : "fault: " + std::string(idem::body_fault_name(fault));
}

TEST(JsonCanonical, MembersInAnyOrderAndWhitespace)
{
    const std::string expected = R"({"amount":100,"currency":"EUR","meta":{"a":[1,2],"b":null}})";
    EXPECT_EQ(canonical(R"({"currency":"EUR","amount":100,"meta":{"b":null,"a":[1,2]}})"), expected);
    EXPECT_EQ(canonical(" {\n  \"meta\" : { \"a\" : [ 1 , 2 ] , \"b\" : null } ,\t\"amount\":100,\r\n\"currency\":\"EUR\"}\n"),
              expected);
}

TEST(JsonCanonical, NumbersAsEcmaScriptWritesThem)
{
    EXPECT_EQ(canonical("[1.0,1,1e2,100,1E2,0.5e1,-0,0.0,-0.0]"), "[1,1,100,100,100,5,0,0,0]");
    EXPECT_EQ(canonical("[1e21,1e20,1.23456789012345678901e20,1e-6,1e-7,0.000001234,-1.5e-10]"),
              "[1e+21,100000000000000000000,123456789012345680000,0.000001,1e-7,0.000001234,-1.5e-10]");
    EXPECT_EQ(canonical("[0.1,1.23e4,4.5,333333333.33333329,1.7976931348623157e308,5e-324]"),
              "[0.1,12300,4.5,333333333.3333333,1.7976931348623157e+308,5e-324]");
    // RFC 8785's own sample of numbers (its §3.2.2.3)
    EXPECT_EQ(canonical("[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]"),
              "[333333333.3333333,1e+30,4.5,0.002,1e-27]");
}

TEST(JsonCanonical, IntegersPastDoublePrecisionKeepTheirDigits)
{
    EXPECT_EQ(canonical("[9007199254740992,9007199254740993,-9007199254740993,18446744073709551615]"),
              "[9007199254740992,9007199254740993,-9007199254740993,18446744073709551615]");
    // past 64 bits an integer is refused (simdjson; I-JSON, RFC 7493 §2.2, advises against them)
    EXPECT_EQ(canonical("[18446744073709551616]"), "fault: not JSON");
    EXPECT_EQ(canonical("[100000000000000000000]"), "fault: not JSON");  // though 1e20's canonical form
    EXPECT_EQ(canonical("[1e400]"), "fault: not JSON");
}

TEST(JsonCanonical, StringsWithMinimalEscapes)
{
    EXPECT_EQ(canonical(R"(["\u00e9","é","\/","\u0041","\u001F","\n\t\b\f\r","\"\\","\ud83d\ude00","\u2028"])"),
              "[\"é\",\"é\",\"/\",\"A\",\"\\u001f\",\"\\n\\t\\b\\f\\r\",\"\\\"\\\\\",\"😀\",\"\u2028\"]");
}

TEST(JsonCanonical, MembersSortedByUtf16CodeUnits)
{
    // RFC 8785 §3.2.3's example: U+FB33 sorts after U+1F600 (whose high surrogate is 0xD83D)
    EXPECT_EQ(canonical(R"({"\ufb33":1,"\ud83d\ude00":2,"a":3,"\u00e9":4,"":5,"ab":6})"),
              "{\"\":5,\"a\":3,\"ab\":6,\"é\":4,\"😀\":2,\"\ufb33\":1}");
    EXPECT_TRUE(idem::utf16_less("\xf0\x9f\x98\x80", "\xef\xac\xb3"));
    EXPECT_FALSE(idem::utf16_less("\xef\xac\xb3", "\xf0\x9f\x98\x80"));
    EXPECT_TRUE(idem::utf16_less("a", "ab"));
    EXPECT_FALSE(idem::utf16_less("a", "a"));
}

TEST(JsonCanonical, FaultsOfABodyThatIsNotWhatIsExpected)
{
    EXPECT_EQ(canonical("amount=100"), "fault: not JSON");
    EXPECT_EQ(canonical("{\"a\":1,}"), "fault: not JSON");
    EXPECT_EQ(canonical("{\"a\":1} {}"), "fault: not JSON");
    EXPECT_EQ(canonical("\"\xff\""), "fault: not JSON");
    EXPECT_EQ(canonical(R"(["\ud800"])"), "fault: not JSON");
    EXPECT_EQ(canonical(R"({"a":1,"b":{"c":1,"c":2}})"), "fault: a JSON member named twice");
    EXPECT_EQ(canonical(R"({"a":1,"\u0061":2})"), "fault: a JSON member named twice");
    EXPECT_EQ(canonical(std::string(32, '[') + std::string(32, ']')), std::string(32, '[') + std::string(32, ']'));
    EXPECT_EQ(canonical(std::string(33, '[') + std::string(33, ']')), "fault: JSON nested too deep");
    EXPECT_EQ(canonical(R"({"a":{"b":1}})", JsonPick::whole, {}, 1), "fault: JSON nested too deep");
    EXPECT_EQ(canonical(std::string(40, '[')), "fault: not JSON");
    EXPECT_EQ(canonical(""), "fault: not JSON");
}

TEST(JsonCanonical, ChosenMembersOnly)
{
    const std::string body = R"({"amount":100,"currency":"EUR","sent_at":"12:00","items":[{"sku":"x"},{"sku":"y"}]})";
    EXPECT_EQ(canonical(body, JsonPick::only, {"/currency", "/amount"}), R"({"/amount":100,"/currency":"EUR"})");
    EXPECT_EQ(canonical(body, JsonPick::only, {"/items/1/sku", "/missing", "/items/2", "/items/01"}),
              R"({"/items/1/sku":"y"})");
    EXPECT_EQ(canonical(R"({"amount":null})", JsonPick::only, {"/amount"}), R"({"/amount":null})");
    EXPECT_EQ(canonical(R"({})", JsonPick::only, {"/amount"}), "{}");
    EXPECT_EQ(canonical(R"({"a/b":1,"m~n":2})", JsonPick::only, {"/a~1b", "/m~0n"}), R"({"/a~1b":1,"/m~0n":2})");
    EXPECT_EQ(canonical("[1]", JsonPick::only, {""}), R"({"":[1]})");
}

TEST(JsonCanonical, AllButSomeMembers)
{
    EXPECT_EQ(canonical(R"({"amount":100,"sent_at":"12:00","meta":{"trace":"t1","k":1}})", JsonPick::except,
                        {"/sent_at", "/meta/trace", "/absent"}),
              R"({"amount":100,"meta":{"k":1}})");
    EXPECT_EQ(canonical(R"({"list":[1,2,3]})", JsonPick::except, {"/list/0"}), R"({"list":[2,3]})");
}

TEST(JsonCanonical, PointerSyntax)
{
    for (std::string_view good : {"", "/", "/a", "/a/0", "/a~0b/~1", "//"}) {
        EXPECT_TRUE(idem::json_pointer_valid(good)) << good;
    }
    for (std::string_view bad : {"a", "/a~", "/a~2", "#/a"}) {
        EXPECT_FALSE(idem::json_pointer_valid(bad)) << bad;
    }
}

std::string form(std::string_view body)
{
    std::string out;
    return idem::canonical_form(body, out) == BodyFault::none ? out : "fault";
}

TEST(FormCanonical, FieldsAsASet)
{
    EXPECT_EQ(form("b=2&a=1"), form("a=1&b=2"));
    EXPECT_EQ(form("a=%41+b&&c"), form("c=&a=A%20b"));
    EXPECT_NE(form("a=1&a=2"), form("a=2&a=1"));  // fields of one name keep their order
    EXPECT_NE(form("a=1&b=2"), form("a=1&b=3"));
    EXPECT_NE(form("a=b%3Dc"), form("a%3Db=c"));
    EXPECT_EQ(form("a=%4"), "fault");
    EXPECT_EQ(form("a=%zz"), "fault");
    EXPECT_EQ(form(""), "");
}

idem::Digest parts_digest(std::string_view description, std::vector<std::pair<idem::Part, std::string_view>> parts)
{
    idem::Sha256 sha;
    idem::begin_parts(sha, description);
    for (auto [part, value] : parts) {
        idem::add_part(sha, part, value);
    }
    return sha.finish();
}

TEST(FingerprintParts, NeverTheDefaultNorAnotherList)
{
    using idem::Part;
    idem::Fingerprinter fp("POST", "/a");
    fp.add_body("x", 1);
    const idem::Digest plain = fp.finish();
    EXPECT_NE(parts_digest("method uri body", {{Part::method, "POST"}, {Part::uri, "/a"}, {Part::body, "x"}}), plain);
    // a boundary moved between two parts changes the digest
    EXPECT_NE(parts_digest("method path", {{Part::method, "POST"}, {Part::path, "/a"}}),
              parts_digest("method path", {{Part::method, "POST/"}, {Part::path, "a"}}));
    // the same values under another list
    EXPECT_NE(parts_digest("method path", {{Part::method, "POST"}, {Part::path, "/a"}}),
              parts_digest("method $uri", {{Part::method, "POST"}, {Part::variable, "/a"}}));
    EXPECT_EQ(parts_digest("method path", {{Part::method, "POST"}, {Part::path, "/a"}}),
              parts_digest("method path", {{Part::method, "POST"}, {Part::path, "/a"}}));
}

}  // namespace
