// RESP command writing: byte-identical to hiredis's redisFormatCommandArgv.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "redis/resp.hpp"

namespace {

std::string ours(const std::vector<std::string>& args)
{
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    std::string out(idem::redis::resp_size(static_cast<int>(args.size()), lens.data()), '\0');
    char* end = idem::redis::resp_write(out.data(), static_cast<int>(args.size()), argv.data(), lens.data());
    EXPECT_EQ(end, out.data() + out.size());
    return out;
}

std::string hiredis(const std::vector<std::string>& args)
{
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    char* cmd = nullptr;
    int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
    std::string out(cmd, static_cast<size_t>(len));
    redisFreeCommand(cmd);
    return out;
}

TEST(Resp, WritesTheDocumentedForm)
{
    EXPECT_EQ(ours({"SET", "k", "v"}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

TEST(Resp, MatchesHiredisForEveryLengthShape)
{
    std::string binary;
    for (int i = 0; i < 256; i++) {
        binary.push_back(static_cast<char>(i));
    }
    const std::vector<std::vector<std::string>> commands = {
        {"PING"},
        {"SET", "idem:abc", std::string(9, 'x'), "NX", "PX", "30000", "GET"},
        {"EVALSHA", std::string(40, 'f'), "1", "key", "", binary, std::string(100000, 'b')},
        {"AUTH", "user", "pass word\r\n"},
        std::vector<std::string>(12, "a"),
    };
    for (const auto& c : commands) {
        EXPECT_EQ(ours(c), hiredis(c));
    }
}

TEST(Resp, LengthsAcrossDigitBoundaries)
{
    for (size_t n : {0u, 9u, 10u, 99u, 100u, 101u, 999u, 1000u, 1001u, 9999u, 10000u, 65535u, 65536u, 100000u}) {
        std::vector<std::string> c = {"SET", std::string(n, 'k')};
        EXPECT_EQ(ours(c), hiredis(c)) << n;
    }
}

}  // namespace

namespace {

TEST(Resp, WritesDecimals)
{
    for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{7}, std::uint64_t{10}, std::uint64_t{99}, std::uint64_t{100},
                            std::uint64_t{101}, std::uint64_t{1000}, std::uint64_t{30000},
                            std::uint64_t{86400000}, std::uint64_t{18446744073709551615u}}) {
        char out[20];
        char* end = idem::redis::write_decimal(out, n);
        EXPECT_EQ(std::string(out, end), std::to_string(n));
    }
}

}  // namespace

namespace {

TEST(Resp, SizeBoundCoversTheCommand)
{
    for (size_t n : {0u, 9u, 10u, 99u, 100u, 12345u}) {
        const std::vector<size_t> lens = {3, n, 2, 5};
        EXPECT_GE(idem::redis::resp_size_bound(4, lens.data()), idem::redis::resp_size(4, lens.data())) << n;
    }
}

}  // namespace
