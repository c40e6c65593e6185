// test_info.cpp — reading fields of Redis's INFO text, and which eviction
// policies can drop the module's keys.
#include <gtest/gtest.h>

#include "redis/info.hpp"

namespace {

using idem::redis::evicts_module_keys;
using idem::redis::info_field;

constexpr std::string_view memory_section =
    "# Memory\r\nused_memory:1090232\r\nused_memory_human:1.04M\r\nmaxmemory:0\r\n"
    "maxmemory_human:0B\r\nmaxmemory_policy:volatile-lru\r\nallocator_frag_ratio:1.10\r\n";

TEST(Info, FindsAFieldByItsWholeName)
{
    EXPECT_EQ(info_field(memory_section, "maxmemory_policy"), "volatile-lru");
    EXPECT_EQ(info_field(memory_section, "maxmemory"), "0");
    EXPECT_EQ(info_field(memory_section, "used_memory"), "1090232");
}

TEST(Info, MissingOrPartialNamesAreEmpty)
{
    EXPECT_EQ(info_field(memory_section, "maxmemory_poli"), "");
    EXPECT_EQ(info_field(memory_section, "nothing"), "");
    EXPECT_EQ(info_field("", "maxmemory_policy"), "");
    EXPECT_EQ(info_field("# Memory", "# Memory"), "");
}

TEST(Info, LinesEndedByNewlineAloneAndTheLastLineWithout)
{
    EXPECT_EQ(info_field("a:1\nmaxmemory_policy:noeviction", "maxmemory_policy"), "noeviction");
    EXPECT_EQ(info_field("maxmemory_policy:allkeys-lru\n", "maxmemory_policy"), "allkeys-lru");
}

TEST(Info, OnlyNoevictionKeepsTheModulesKeys)
{
    EXPECT_FALSE(evicts_module_keys("noeviction"));
    EXPECT_FALSE(evicts_module_keys(""));  // not reported: nothing to say
    for (const char* policy : {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
                               "allkeys-lfu", "allkeys-random"}) {
        EXPECT_TRUE(evicts_module_keys(policy)) << policy;
    }
}

}  // namespace

namespace {

using idem::redis::ConditionalDelete;
using idem::redis::server_features;

TEST(ServerFeatures, Redis7HasNoConditionalWrite)
{
    auto f = server_features("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
    EXPECT_TRUE(f.known);
    EXPECT_FALSE(f.set_ifeq);
    EXPECT_EQ(f.del, ConditionalDelete::none);
    EXPECT_FALSE(server_features("redis_version:8.2.3\r\n").set_ifeq);
}

TEST(ServerFeatures, Redis84HasSetIfeqAndDelex)
{
    for (auto info : {"redis_version:8.4.0\r\n", "redis_version:8.10.1\n", "redis_version:9.0.0\r\n",
                      "redis_version:255.255.255\r\n"}) {
        auto f = server_features(info);
        EXPECT_TRUE(f.set_ifeq) << info;
        EXPECT_EQ(f.del, ConditionalDelete::delex_ifeq) << info;
    }
}

TEST(ServerFeatures, ValkeyIsJudgedByItsOwnVersion)
{
    // Valkey keeps redis_version at 7.2.4 for clients that check it
    auto v80 = server_features("redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.2\r\n");
    EXPECT_FALSE(v80.set_ifeq);
    auto v81 = server_features("redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n");
    EXPECT_TRUE(v81.set_ifeq);
    EXPECT_EQ(v81.del, ConditionalDelete::none);
    auto v91 = server_features("redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n");
    EXPECT_TRUE(v91.set_ifeq);
    EXPECT_EQ(v91.del, ConditionalDelete::delifeq);
    // a Valkey that does not say its version has none
    EXPECT_FALSE(server_features("redis_version:7.2.4\r\nserver_name:valkey\r\n").set_ifeq);
}

TEST(ServerFeatures, UnreadableOrOtherServersHaveNone)
{
    for (auto info : {"", "redis_version:\r\n", "redis_version:8\r\n", "redis_version:x.4\r\n",
                      "redis_version:8.x\r\n", "redis_version:8.4000\r\n", "redis_version:99999999.4\r\n",
                      "redis_version:9.0.0\r\nserver_name:keydb\r\n"}) {
        auto f = server_features(info);
        EXPECT_FALSE(f.set_ifeq) << info;
        EXPECT_EQ(f.del, ConditionalDelete::none) << info;
    }
}

}  // namespace
