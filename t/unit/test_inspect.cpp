// test_inspect.cpp — the operator's inspection of a store key: its state
// for every kind of value, and the JSON it answers, which tells the record
// apart without the raw key, the body, or anything sealed.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>

#include "claim_token.hpp"
#include "inspect.hpp"
#include "record.hpp"
#include "seal.hpp"

namespace {

using idem::KeyState;

idem::Digest fingerprint_of(std::uint8_t first)
{
    idem::Digest d{};
    for (std::size_t i = 0; i < d.size(); i++) {
        d[i] = static_cast<std::uint8_t>(first + i);
    }
    return d;
}

std::string claim_with(const idem::Holder& holder)
{
    const unsigned char unique[idem::token_unique_length] = {};
    std::string token(idem::claim_token_size(holder), '\0');
    token.resize(idem::encode_claim_token(unique, holder, token.data()));
    std::string out(idem::claim_size(token), '\0');
    idem::encode_claim(fingerprint_of(0xa0), token, out.data());
    return out;
}

std::string response(std::uint16_t status, std::string_view body)
{
    idem::Header headers[] = {{"Content-Type", "text/plain"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}};
    std::string out(idem::response_size(headers, 3, body.size()), '\0');
    char* at = idem::encode_response_head(out.data(), fingerprint_of(1), status, headers, 3, body.size());
    std::copy(body.begin(), body.end(), at);
    return out;
}

std::string json_of(std::optional<std::string_view> value, const idem::InspectFacts& facts)
{
    std::string out(idem::inspection_room(facts.store.size()), '\0');
    out.resize(idem::inspection_json(value, facts, out.data(), out.size()));
    return out;
}

// An envelope's shape (inspection never opens it).
std::string sealed_value()
{
    return std::string("IDE\x01", 4) + std::string(64, 'x');
}

idem::InspectFacts facts()
{
    idem::InspectFacts f;
    f.key_hash = "00ff";
    f.store = "redis 127.0.0.1:6379";
    f.now_ms = 1795695112000ULL;  // 2026-11-26T12:11:52Z
    f.ttl_ms = 20000;
    f.ttl_conf_ms = 86400000;
    return f;
}

TEST(Inspect, States)
{
    EXPECT_EQ(idem::key_state(std::nullopt), KeyState::absent);
    EXPECT_EQ(idem::key_state(claim_with({"gw", 1, 2, 3})), KeyState::claimed);
    EXPECT_EQ(idem::key_state(response(201, "ok")), KeyState::stored);
    EXPECT_EQ(idem::key_state("not a record"), KeyState::foreign);
    std::string bad = response(201, "ok");
    bad[37] = 0;  // status 0..: a response no gateway writes
    bad[38] = 0;
    EXPECT_EQ(idem::key_state(bad), KeyState::unusable);
    std::string sealed = sealed_value();
    ASSERT_TRUE(idem::is_sealed(sealed));
    EXPECT_EQ(idem::key_state(sealed), KeyState::stored);
}

TEST(Inspect, AStoredResponse)
{
    std::string body = "the secret body";
    std::string json = json_of(response(201, body), facts());
    EXPECT_NE(json.find("\"state\":\"stored\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"response\":{\"status\":201,\"headers\":3,\"body_bytes\":15,\"trailers\":0}"),
              std::string::npos) << json;
    EXPECT_EQ(json.find("\"fingerprint\""), std::string::npos) << "no key, no fingerprint: " << json;
    EXPECT_NE(json.find("\"expires_at\":\"2026-11-26T12:12:12.000Z\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"created_at\":\"2026-11-25T12:12:12.000Z\",\"created_at_estimated\":true"),
              std::string::npos) << json;
    EXPECT_NE(json.find("replayed (status 201)"), std::string::npos) << json;
    EXPECT_EQ(json.find("secret"), std::string::npos) << "no body in " << json;
    EXPECT_EQ(json.find("Set-Cookie"), std::string::npos) << "no header in " << json;
}

// An unreplayable marker: what it says when it says why (a response that
// breaks HTTP, known at capture), else what such a marker may stand for.
TEST(Inspect, AnUnreplayableMarkerAndWhy)
{
    std::string plain(idem::unreplayable_size, '\0');
    idem::encode_unreplayable(fingerprint_of(1), 201, plain.data());
    std::string json = json_of(plain, facts());
    EXPECT_NE(json.find("\"state\":\"unreplayable\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"unreplayable\":{\"status\":201,\"why\":\"executed, but not kept for replay: larger than"),
              std::string::npos) << json;
    std::string said(idem::unreplayable_why_size, '\0');
    said.resize(idem::encode_unreplayable(fingerprint_of(1), 600, idem::MarkerWhy::bad_status, said.data()));
    EXPECT_EQ(idem::key_state(said), KeyState::unreplayable);
    json = json_of(said, facts());
    EXPECT_NE(json.find("\"unreplayable\":{\"status\":600,\"why\":\"its status is outside 200-599 (a 1xx is no "
                        "final answer)\"}"),
              std::string::npos) << json;
    said[said.size() - 1] = 99;  // a later release's reason: what any marker may stand for
    json = json_of(said, facts());
    EXPECT_NE(json.find("\"why\":\"executed, but not kept for replay"), std::string::npos) << json;
}

// The fingerprint is an unsalted SHA-256 of method, URI and body: shown
// raw, a small body could be guessed from it. It is shown keyed with a
// secret of the deployment: two keys compare, nothing can be looked up.
TEST(Inspect, TheFingerprintIsShownKeyed)
{
    idem::InspectFacts f = facts();
    const std::string key(32, 'k');
    f.fingerprint_key = key;
    std::string json = json_of(response(201, "amount=1"), f);
    const idem::Digest fp = fingerprint_of(1);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ASSERT_NE(HMAC(EVP_sha256(), key.data(), int(key.size()), fp.data(), fp.size(), mac, &len), nullptr);
    char hex[17];
    idem::to_hex(mac, 8, hex);
    EXPECT_NE(json.find("\"fingerprint\":\"" + std::string(hex, 16) + "\""), std::string::npos) << json;
    EXPECT_EQ(json.find("\"fingerprint\":\"0102030405060708\""), std::string::npos) << json;
    // another key, another value; the same request under two keys, one value
    const std::string other(32, 'o');
    f.fingerprint_key = other;
    EXPECT_EQ(json_of(response(201, "amount=1"), f).find(std::string(hex, 16)), std::string::npos);
    f.fingerprint_key = key;
    EXPECT_NE(json_of(response(200, "x"), f).find(std::string(hex, 16)), std::string::npos);
}

// A record the inspecting location's settings cannot open is not judged
// there: never reported unusable (which a purge without force removes).
TEST(Inspect, WhatThisLocationCannotOpenIsNotJudged)
{
    idem::InspectFacts f = facts();
    // larger than this location's idempotency_max_response_size
    f.limits = {10, 1000};
    std::string json = json_of(response(201, "eleven byte"), f);
    EXPECT_NE(json.find("\"state\":\"unjudged\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"not_judged_here\":\"larger than this location's"), std::string::npos) << json;
    EXPECT_NE(json.find("\"body_bytes\":11"), std::string::npos) << json;
    EXPECT_NE(json.find("purged only with force=1"), std::string::npos) << json;
    EXPECT_EQ(idem::judged_state(response(201, "eleven byte"), f), KeyState::unjudged);
    f.limits = {11, 1000};
    EXPECT_EQ(idem::judged_state(response(201, "eleven byte"), f), KeyState::stored);
    // a later release's layout
    std::string later = response(201, "ok");
    later[3] = '\x09';
    EXPECT_EQ(idem::key_state(later), KeyState::unjudged);
    EXPECT_NE(json_of(later, facts()).find("a record of a later release's layout"), std::string::npos);
    // damaged: no location opens it
    EXPECT_EQ(idem::key_state(response(201, "ok").substr(0, 30)), KeyState::unusable);
}

TEST(Inspect, AClaimAndItsHolder)
{
    idem::InspectFacts f = facts();
    f.wait_ms = 5000;
    // claimed 25 s ago with lock_ttl 30 s; 20 s left: renewed 10 s ago
    std::string json = json_of(claim_with({"gw\"1", 4242, f.now_ms - 25000, 30000}), f);
    EXPECT_NE(json.find("\"state\":\"claimed\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"gateway\":\"gw\\\"1\""), std::string::npos) << "escaped: " << json;
    EXPECT_NE(json.find("\"worker_pid\":4242"), std::string::npos) << json;
    EXPECT_NE(json.find("\"claimed_at\":\"2026-11-26T12:11:27.000Z\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"last_renewal\":\"2026-11-26T12:11:42.000Z\""), std::string::npos) << json;
    EXPECT_NE(json.find("waits up to 5000 ms"), std::string::npos) << json;
    f.wait_ms = 0;
    EXPECT_NE(json_of(claim_with({"gw", 1, f.now_ms, 30000}), f).find("\"next_request\":\"409"), std::string::npos);
}

TEST(Inspect, AClaimWithoutHolder)
{
    std::string out(idem::claim_size("0123456789abcdef"), '\0');
    idem::encode_claim(fingerprint_of(0), "0123456789abcdef", out.data());
    std::string json = json_of(out, facts());
    EXPECT_NE(json.find("\"claim\":{\"holder\":null}"), std::string::npos) << json;
}

TEST(Inspect, SealedShowsNothingOpened)
{
    idem::InspectFacts f = facts();
    f.sealing = true;
    std::string json = json_of(sealed_value(), f);
    EXPECT_NE(json.find("\"encrypted\":true"), std::string::npos) << json;
    EXPECT_EQ(json.find("\"response\""), std::string::npos) << json;
    EXPECT_EQ(json.find("\"fingerprint\""), std::string::npos) << json;
    f.sealing = false;
    EXPECT_NE(json_of(sealed_value(), f).find("no idempotency_encrypt_key"), std::string::npos);
}

TEST(Inspect, AbsentAndForeign)
{
    std::string json = json_of(std::nullopt, facts());
    EXPECT_EQ(json, "{\"key_hash\":\"00ff\",\"store\":\"redis 127.0.0.1:6379\",\"state\":\"absent\","
                    "\"next_request\":\"forwarded to the upstream: a first execution\"}");
    EXPECT_NE(json_of("\x01\x02", facts()).find("\"state\":\"foreign\""), std::string::npos);
}

TEST(Inspect, TooLittleRoomIsZero)
{
    char small[40];
    EXPECT_EQ(idem::inspection_json(std::nullopt, facts(), small, sizeof small), 0u);
}

}  // namespace
