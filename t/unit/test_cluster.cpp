// Redis Cluster's pure rules: key slots, redirections, the CLUSTER SLOTS map.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "redis/cluster.hpp"

using namespace idem::redis;

namespace {

// A reply parsed by hiredis itself from RESP bytes.
struct Parsed {
    explicit Parsed(const std::string& resp)
    {
        redisReader* reader = redisReaderCreate();
        redisReaderFeed(reader, resp.data(), resp.size());
        void* out = nullptr;
        EXPECT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
        reply = static_cast<redisReply*>(out);
        redisReaderFree(reader);
    }
    ~Parsed() { freeReplyObject(reply); }
    redisReply* reply = nullptr;
};

std::vector<SlotRange> ranges_of(const redisReply* reply, bool& ok, std::vector<std::string>& hosts)
{
    std::vector<SlotRange> out;
    ok = parse_cluster_slots(reply, [](void* data, const SlotRange& r) {
        static_cast<std::vector<SlotRange>*>(data)->push_back(r);
    }, &out);
    for (const auto& r : out) {
        hosts.emplace_back(r.host);
    }
    return out;
}

}  // namespace

TEST(ClusterSlot, MatchesTheClusterSpecification)
{
    // The CRC16 check value of the XMODEM variant, and slots Redis itself gives.
    EXPECT_EQ(key_slot("123456789"), 0x31C3u & 16383u);
    EXPECT_EQ(key_slot("foo"), 12182u);
    EXPECT_EQ(key_slot("bar"), 5061u);
    EXPECT_EQ(key_slot(""), 0u);
}

TEST(ClusterSlot, HashesOnlyANonEmptyHashTag)
{
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("{user1000}.following"));
    EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
    EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));  // the first {} is empty: the whole key counts
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
    EXPECT_EQ(key_slot("no tag {here"), key_slot(std::string_view("no tag {here")));
}

TEST(ClusterRedirect, ParsesMovedAndAsk)
{
    auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
    ASSERT_TRUE(moved);
    EXPECT_FALSE(moved->ask);
    EXPECT_EQ(moved->slot, 3999u);
    EXPECT_EQ(moved->host, "127.0.0.1");
    EXPECT_EQ(moved->port, 6381u);

    auto ask = parse_redirect("ASK 16383 [::1]:7002");
    ASSERT_TRUE(ask);
    EXPECT_TRUE(ask->ask);
    EXPECT_EQ(ask->slot, 16383u);
    EXPECT_EQ(ask->host, "::1");
    EXPECT_EQ(ask->port, 7002u);

    auto unknown_host = parse_redirect("MOVED 1 :7000");
    ASSERT_TRUE(unknown_host);
    EXPECT_EQ(unknown_host->host, "");
}

TEST(ClusterRedirect, RefusesAnythingElse)
{
    for (const char* e : {"ERR unknown command", "MOVED", "MOVED 3999", "MOVED 16384 127.0.0.1:1", "MOVED x 1.2.3.4:5",
                          "MOVED 1 127.0.0.1", "MOVED 1 127.0.0.1:0", "MOVED 1 127.0.0.1:65536", "ASK -1 a:1",
                          "MOVED 1 127.0.0.1:12a", "moved 1 127.0.0.1:1", "CLUSTERDOWN The cluster is down"}) {
        EXPECT_FALSE(parse_redirect(e)) << e;
    }
}

TEST(ClusterSlots, ReadsEveryRangeAndItsMaster)
{
    // Redis 7: [first, last, [ip, port, id, [metadata]], replicas...]
    Parsed p("*2\r\n"
             "*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*0\r\n"
             "*4\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid2\r\n*0\r\n"
             "*3\r\n:5461\r\n:16383\r\n*3\r\n$1\r\n?\r\n:7001\r\n$3\r\nid3\r\n");
    bool ok = false;
    std::vector<std::string> hosts;
    auto ranges = ranges_of(p.reply, ok, hosts);
    ASSERT_TRUE(ok);
    ASSERT_EQ(ranges.size(), 2u);
    EXPECT_EQ(ranges[0].first, 0u);
    EXPECT_EQ(ranges[0].last, 5460u);
    EXPECT_EQ(hosts[0], "127.0.0.1");
    EXPECT_EQ(ranges[0].port, 7000u);
    EXPECT_EQ(ranges[1].first, 5461u);
    EXPECT_EQ(ranges[1].last, 16383u);
    EXPECT_EQ(hosts[1], "");  // "?": the node that answered
    EXPECT_EQ(ranges[1].port, 7001u);
}

TEST(ClusterSlots, RefusesMalformedMapsWithoutCallingBack)
{
    for (const char* resp : {
             "$2\r\nno\r\n",                                                // not an array
             "*0\r\n",                                                      // no ranges
             "*1\r\n*2\r\n:0\r\n:1\r\n",                                    // no master
             "*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n",             // first > last
             "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n",         // past the last slot
             "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:0\r\n",             // port 0
             "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",                  // host not a string
             "*2\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n:7\r\n",       // second range not an array
         }) {
        Parsed p(resp);
        bool ok = true;
        std::vector<std::string> hosts;
        auto ranges = ranges_of(p.reply, ok, hosts);
        EXPECT_FALSE(ok) << resp;
        EXPECT_TRUE(ranges.empty()) << resp;
    }
}
