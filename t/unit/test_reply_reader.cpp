// The reply reader: hiredis's parser with reply objects of one allocation
// each, and a bound on array sizes.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <string>

#include "redis/reply_reader.hpp"

using idem::redis::create_reply_reader;
using idem::redis::free_reply;

namespace {

// Feeds `resp` to a new reader; the first reply, or nullptr with ok false
// on a protocol error.
struct Read {
    explicit Read(const std::string& resp, bool large = false)
    {
        redisReader* reader = create_reply_reader(large);
        EXPECT_NE(reader, nullptr);
        EXPECT_EQ(redisReaderFeed(reader, resp.data(), resp.size()), REDIS_OK);
        void* out = nullptr;
        ok = redisReaderGetReply(reader, &out) == REDIS_OK;
        reply = static_cast<redisReply*>(out);
        redisReaderFree(reader);
    }
    ~Read() { free_reply(reply); }
    bool ok = false;
    redisReply* reply = nullptr;
};

TEST(ReplyReader, Scalars)
{
    Read nil("$-1\r\n");
    ASSERT_TRUE(nil.ok && nil.reply);
    EXPECT_EQ(nil.reply->type, REDIS_REPLY_NIL);

    Read str(std::string("$5\r\nhel\0o\r\n", 12));
    ASSERT_TRUE(str.ok && str.reply);
    EXPECT_EQ(str.reply->type, REDIS_REPLY_STRING);
    EXPECT_EQ(std::string(str.reply->str, str.reply->len), std::string("hel\0o", 5));
    EXPECT_EQ(str.reply->str[5], '\0');

    Read empty("$0\r\n\r\n");
    ASSERT_TRUE(empty.ok && empty.reply);
    EXPECT_EQ(empty.reply->len, 0u);
    EXPECT_STREQ(empty.reply->str, "");

    Read status("+OK\r\n");
    ASSERT_TRUE(status.ok && status.reply);
    EXPECT_EQ(status.reply->type, REDIS_REPLY_STATUS);
    EXPECT_STREQ(status.reply->str, "OK");

    Read error("-NOSCRIPT No matching script\r\n");
    ASSERT_TRUE(error.ok && error.reply);
    EXPECT_EQ(error.reply->type, REDIS_REPLY_ERROR);
    EXPECT_STREQ(error.reply->str, "NOSCRIPT No matching script");

    Read integer(":-42\r\n");
    ASSERT_TRUE(integer.ok && integer.reply);
    EXPECT_EQ(integer.reply->type, REDIS_REPLY_INTEGER);
    EXPECT_EQ(integer.reply->integer, -42);
}

TEST(ReplyReader, Arrays)
{
    Read nested("*3\r\n$4\r\nhost\r\n:6379\r\n*2\r\n$-1\r\n+x\r\n");
    ASSERT_TRUE(nested.ok && nested.reply);
    const redisReply* r = nested.reply;
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 3u);
    EXPECT_STREQ(r->element[0]->str, "host");
    EXPECT_EQ(r->element[1]->integer, 6379);
    ASSERT_EQ(r->element[2]->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->element[2]->elements, 2u);
    EXPECT_EQ(r->element[2]->element[0]->type, REDIS_REPLY_NIL);
    EXPECT_STREQ(r->element[2]->element[1]->str, "x");

    Read none("*0\r\n");
    ASSERT_TRUE(none.ok && none.reply);
    EXPECT_EQ(none.reply->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(none.reply->elements, 0u);

    Read nil("*-1\r\n");
    ASSERT_TRUE(nil.ok && nil.reply);
    EXPECT_EQ(nil.reply->type, REDIS_REPLY_NIL);
}

TEST(ReplyReader, ArraySizeBound)
{
    std::string seventeen = "*17\r\n";
    for (int i = 0; i < 17; i++) {
        seventeen += ":1\r\n";
    }
    Read small(seventeen);
    EXPECT_FALSE(small.ok);
    EXPECT_EQ(small.reply, nullptr);
    Read large(seventeen, true);
    ASSERT_TRUE(large.ok && large.reply);
    EXPECT_EQ(large.reply->elements, 17u);
    EXPECT_FALSE(Read("*16385\r\n", true).ok);
}

TEST(ReplyReader, ReplyCutShortIsFreedWithTheReader)
{
    Read partial("*3\r\n$1\r\na\r\n*2\r\n:1\r\n");  // no reply yet; the reader frees what it built
    EXPECT_TRUE(partial.ok);
    EXPECT_EQ(partial.reply, nullptr);
}

}  // namespace

namespace {

TEST(ReplyReader, KnowsWhenEverythingWasTaken)
{
    redisReader* reader = create_reply_reader(false);
    EXPECT_FALSE(idem::redis::has_unread(reader));
    const std::string two = "$-1\r\n:1\r\n";
    redisReaderFeed(reader, two.data(), two.size());
    int replies = 0;
    while (idem::redis::has_unread(reader)) {
        void* reply = nullptr;
        ASSERT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
        ASSERT_NE(reply, nullptr);
        free_reply(static_cast<redisReply*>(reply));
        replies++;
    }
    EXPECT_EQ(replies, 2);
    const std::string half = "$5\r\nab";
    redisReaderFeed(reader, half.data(), half.size());
    EXPECT_TRUE(idem::redis::has_unread(reader));
    void* reply = nullptr;
    ASSERT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    EXPECT_EQ(reply, nullptr);  // the rest of the string is still to come
    redisReaderFree(reader);
}

}  // namespace

namespace {

TEST(ReplyReader, StringCanBeTakenOver)
{
    redisReader* reader = create_reply_reader(false);
    const std::string resp = "$6\r\nrecord\r\n";
    redisReaderFeed(reader, resp.data(), resp.size());
    void* out = nullptr;
    ASSERT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
    auto* reply = static_cast<redisReply*>(out);
    ASSERT_NE(reply, nullptr);
    char* taken = reply->str;  // a malloc() block of its own, as the replay keeps it
    reply->str = nullptr;
    free_reply(reply);
    EXPECT_STREQ(taken, "record");
    std::free(taken);
    redisReaderFree(reader);
}

}  // namespace

namespace {

TEST(ReplyReader, SkipsTheStatusesOfATransaction)
{
    using idem::redis::skip_plain_status;
    redisReader* reader = create_reply_reader(false);
    EXPECT_FALSE(skip_plain_status(reader));  // nothing to read
    const std::string replies = "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:-1\r\n$-1\r\n+OKAY\r\n";
    redisReaderFeed(reader, replies.data(), replies.size());
    EXPECT_TRUE(skip_plain_status(reader));
    EXPECT_TRUE(skip_plain_status(reader));
    EXPECT_TRUE(skip_plain_status(reader));
    EXPECT_FALSE(skip_plain_status(reader));  // EXEC's array is read as ever
    void* out = nullptr;
    ASSERT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
    auto* exec = static_cast<redisReply*>(out);
    ASSERT_NE(exec, nullptr);
    EXPECT_EQ(exec->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(exec->elements, 2u);
    free_reply(exec);
    EXPECT_FALSE(skip_plain_status(reader));  // another status: not one of the two
    ASSERT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
    ASSERT_NE(out, nullptr);
    EXPECT_STREQ(static_cast<redisReply*>(out)->str, "OKAY");
    free_reply(static_cast<redisReply*>(out));
    EXPECT_FALSE(idem::redis::has_unread(reader));

    const std::string half = "+QUEU";
    redisReaderFeed(reader, half.data(), half.size());
    EXPECT_FALSE(skip_plain_status(reader));  // not whole yet
    const std::string rest = "ED\r\n*1\r\n";
    redisReaderFeed(reader, rest.data(), rest.size());
    EXPECT_TRUE(skip_plain_status(reader));
    ASSERT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
    EXPECT_EQ(out, nullptr);  // an array begun
    const std::string element = "+OK\r\n";
    redisReaderFeed(reader, element.data(), element.size());
    EXPECT_FALSE(skip_plain_status(reader));  // the array's element, not a reply of its own
    ASSERT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(static_cast<redisReply*>(out)->elements, 1u);
    EXPECT_STREQ(static_cast<redisReply*>(out)->element[0]->str, "OK");
    free_reply(static_cast<redisReply*>(out));
    redisReaderFree(reader);
}

}  // namespace

namespace {

TEST(ReplyReader, ReadsABareNilWithoutParsingIt)
{
    using idem::redis::read_reply;
    redisReader* reader = create_reply_reader(false);
    void* out = reinterpret_cast<void*>(1);
    ASSERT_EQ(read_reply(reader, &out), REDIS_OK);
    EXPECT_EQ(out, nullptr);  // nothing to read
    const std::string replies = "$-1\r\n$-1\r\n*2\r\n$-1\r\n:7\r\n$-";
    redisReaderFeed(reader, replies.data(), replies.size());
    void* first = nullptr;
    void* second = nullptr;
    ASSERT_EQ(read_reply(reader, &first), REDIS_OK);
    ASSERT_EQ(read_reply(reader, &second), REDIS_OK);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first, second);  // the shared nil
    EXPECT_EQ(static_cast<redisReply*>(first)->type, REDIS_REPLY_NIL);
    EXPECT_EQ(static_cast<redisReply*>(first)->str, nullptr);
    free_reply(static_cast<redisReply*>(first));  // left alone
    free_reply(static_cast<redisReply*>(second));
    EXPECT_EQ(static_cast<redisReply*>(first)->type, REDIS_REPLY_NIL);
    ASSERT_EQ(read_reply(reader, &out), REDIS_OK);  // an array's nil element is its own
    auto* array = static_cast<redisReply*>(out);
    ASSERT_NE(array, nullptr);
    ASSERT_EQ(array->elements, 2u);
    EXPECT_EQ(array->element[0]->type, REDIS_REPLY_NIL);
    EXPECT_NE(array->element[0], first);
    EXPECT_EQ(array->element[1]->integer, 7);
    free_reply(array);
    ASSERT_EQ(read_reply(reader, &out), REDIS_OK);
    EXPECT_EQ(out, nullptr);  // not whole yet
    const std::string rest = "1\r\n";
    redisReaderFeed(reader, rest.data(), rest.size());
    ASSERT_EQ(read_reply(reader, &out), REDIS_OK);
    ASSERT_NE(out, nullptr);  // hiredis's own, having begun it
    EXPECT_EQ(static_cast<redisReply*>(out)->type, REDIS_REPLY_NIL);
    free_reply(static_cast<redisReply*>(out));
    EXPECT_FALSE(idem::redis::has_unread(reader));
    redisReaderFree(reader);
}

}  // namespace
