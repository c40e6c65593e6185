// test_command_trace.cpp — redis/resp.hpp's trace_command: what a debug
// line may show of a command written to Redis: its name and the start of a
// store key's hash, never a value, a password or a script.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/resp.hpp"

namespace {

using idem::redis::trace_command;

const std::string hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string key = "idempotency:9:localhost:" + hash;

idem::redis::CommandTrace trace(const std::vector<std::string>& words)
{
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& w : words) {
        argv.push_back(w.data());
        lens.push_back(w.size());
    }
    return trace_command(static_cast<int>(words.size()), argv.data(), lens.data());
}

TEST(CommandTrace, TheClaimShowsItsNameAndTheStartOfTheKeysHash)
{
    auto t = trace({"SET", key, "claim-record", "NX", "PX", "30000", "GET"});
    EXPECT_EQ(t.name, "SET");
    EXPECT_EQ(t.key_hash, "01234567");
}

TEST(CommandTrace, AScriptCallShowsItsKeyNotItsScriptNorItsRecord)
{
    auto t = trace({"EVALSHA", std::string(40, 'f'), "1", key, "claim", "record", "86400000"});
    EXPECT_EQ(t.name, "EVALSHA");
    EXPECT_EQ(t.key_hash, "01234567");
    t = trace({"EVAL", "return 1", "1", key, "claim"});
    EXPECT_EQ(t.key_hash, "01234567");
    t = trace({"PEXPIRETIME", key});
    EXPECT_EQ(t.key_hash, "01234567");
}

TEST(CommandTrace, AuthShowsItsNameOnly)
{
    auto t = trace({"AUTH", "user", std::string(64, 'a')});  // a password that looks like a hash
    EXPECT_EQ(t.name, "AUTH");
    EXPECT_TRUE(t.key_hash.empty());
    t = trace({"SELECT", "2"});
    EXPECT_TRUE(t.key_hash.empty());
}

TEST(CommandTrace, AKeyThatIsNotAStoreKeyShowsNothing)
{
    EXPECT_TRUE(trace({"SET", "short", "v"}).key_hash.empty());
    EXPECT_TRUE(trace({"SET", std::string(64, 'Z'), "v"}).key_hash.empty());
    EXPECT_TRUE(trace({"EVALSHA", "sha", "1"}).key_hash.empty());  // no key given
    EXPECT_TRUE(trace({}).name.empty());
}

}  // namespace
