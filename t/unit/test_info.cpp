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
