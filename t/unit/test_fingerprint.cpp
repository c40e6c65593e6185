// test_fingerprint.cpp — SHA-256 known vectors, hex encoding, and the
// request fingerprint's sensitivity to method, URI and body.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fingerprint.hpp"

namespace {

std::string hex(const idem::Digest& digest)
{
    std::string out(2 * digest.size(), '?');
    idem::to_hex(digest.data(), digest.size(), out.data());
    return out;
}

idem::Digest fingerprint(std::string_view method, std::string_view uri, std::string_view body)
{
    idem::Fingerprinter fp(method, uri);
    EXPECT_TRUE(fp.ok());
    fp.add_body(body.data(), body.size());
    const idem::Digest digest = fp.finish();
    EXPECT_TRUE(fp.ok());
    return digest;
}

TEST(Sha256, KnownVectors)
{
    EXPECT_EQ(hex(idem::sha256("abc")),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(idem::sha256("")),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(hex(idem::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalEqualsOneShot)
{
    idem::Sha256 sha;
    ASSERT_TRUE(sha.ok());
    sha.update("a", 1);
    sha.update("", 0);
    sha.update(nullptr, 0);
    sha.update("bc", 2);
    EXPECT_EQ(sha.finish(), idem::sha256("abc"));
    EXPECT_TRUE(sha.ok());
}

TEST(Sha256, PiecesEqualOneShot)
{
    const std::string a(200, 'a'), b(100, 'b'), c(300, 'c');
    const std::vector<std::vector<std::string_view>> cases = {
        {}, {""}, {"x", "", "yz"}, {a, b}, {b, c, "d"}, {c}, {a, "", a, a}, {std::string_view(a).substr(0, 56), "z"},
    };
    for (const auto& pieces : cases) {
        std::string joined;
        for (auto p : pieces) {
            joined += p;
        }
        idem::Sha256 sha;
        switch (pieces.size()) {
        case 0: sha.update({}); break;
        case 1: sha.update({pieces[0]}); break;
        case 2: sha.update({pieces[0], pieces[1]}); break;
        case 3: sha.update({pieces[0], pieces[1], pieces[2]}); break;
        default: sha.update({pieces[0], pieces[1], pieces[2], pieces[3]}); break;
        }
        EXPECT_EQ(sha.finish(), idem::sha256(joined)) << joined.size();
    }
}

TEST(ToHex, LowerCaseEveryNibble)
{
    const std::uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff};
    char out[2 * sizeof bytes];
    idem::to_hex(bytes, sizeof bytes, out);
    EXPECT_EQ(std::string(out, sizeof out), "00017f80abcdefff");
}

TEST(Fingerprint, KnownVectors)
{
    // printf 'POST\n/orders?x=1\n{"a":1}' | sha256sum
    EXPECT_EQ(hex(fingerprint("POST", "/orders?x=1", "{\"a\":1}")),
              "7ce5293c2930f6a183c0a0fde447dd432ea30023e64bd641573b664183191e20");
    // printf 'GET\n/\n' | sha256sum
    EXPECT_EQ(hex(fingerprint("GET", "/", "")),
              "139fb16fdd19069e75f6f3dd0e619a89fb157dab65e8722c66e6b3fd43f7900c");
}

TEST(Fingerprint, ChunkedBodyEqualsOneShot)
{
    std::string body;
    for (int i = 0; i < 100000; ++i) {
        body.push_back(static_cast<char>(i * 31 + 7));  // binary, NULs included
    }
    const idem::Digest one_shot = fingerprint("PUT", "/x", body);

    for (std::size_t chunk : {1u, 7u, 4096u, 65536u}) {
        idem::Fingerprinter fp("PUT", "/x");
        for (std::size_t at = 0; at < body.size(); at += chunk) {
            const std::size_t size = std::min(chunk, body.size() - at);
            fp.add_body(body.data() + at, size);
        }
        EXPECT_EQ(fp.finish(), one_shot) << "chunk " << chunk;
    }
}

TEST(Fingerprint, EachPartMatters)
{
    const idem::Digest base = fingerprint("POST", "/orders", "body");
    EXPECT_EQ(fingerprint("POST", "/orders", "body"), base);
    EXPECT_NE(fingerprint("PUT", "/orders", "body"), base);
    EXPECT_NE(fingerprint("post", "/orders", "body"), base);
    EXPECT_NE(fingerprint("POST", "/orders/", "body"), base);
    EXPECT_NE(fingerprint("POST", "/orders?a=1", "body"), base);
    EXPECT_NE(fingerprint("POST", "/orders", "bodY"), base);
    EXPECT_NE(fingerprint("POST", "/orders", "body "), base);
    EXPECT_NE(fingerprint("POST", "/orders", ""), base);
}

TEST(Fingerprint, FramingSeparatesParts)
{
    // Moving bytes between URI and body must change the fingerprint.
    EXPECT_NE(fingerprint("POST", "/a", "b"), fingerprint("POST", "/ab", ""));
    EXPECT_NE(fingerprint("PO", "ST/a", ""), fingerprint("POST", "/a", ""));
}

}  // namespace
