// test_timing.cpp — timing.hpp: the one backoff every retry of the module
// follows (a Redis reconnect, a Sentinel lookup, a call owed Redis, the
// looks of waiting requests), and the timeout a shared Redis connection
// applies.
#include <gtest/gtest.h>

#include "timing.hpp"

namespace {

using idem::Backoff;
using idem::shortest_timeout;

TEST(Backoff, DoublesFromTheFirstWaitUpToTheLongest)
{
    constexpr Backoff b{100, 1000};
    EXPECT_EQ(b.after(0), 100u);
    EXPECT_EQ(b.after(100), 200u);
    EXPECT_EQ(b.after(200), 400u);
    EXPECT_EQ(b.after(400), 800u);
    EXPECT_EQ(b.after(800), 1000u);
    EXPECT_EQ(b.after(1000), 1000u);
}

TEST(Backoff, TheWaitingRequestsLookSequence)
{
    constexpr Backoff looks{25, 500};
    std::uint64_t wait = 0;
    const std::uint64_t expected[] = {25, 50, 100, 200, 400, 500, 500};
    for (std::uint64_t e : expected) {
        wait = looks.after(wait);
        EXPECT_EQ(wait, e);
    }
}

TEST(Backoff, IsAConstantExpression)
{
    static_assert(Backoff{100, 1000}.after(0) == 100);
    static_assert(Backoff{100, 1000}.after(600) == 1000);
}

TEST(ShortestTimeout, TheFirstOfferedIsTakenThenOnlyAShorterOne)
{
    EXPECT_EQ(shortest_timeout(0, 5000), 5000u);
    EXPECT_EQ(shortest_timeout(5000, 1000), 1000u);
    EXPECT_EQ(shortest_timeout(1000, 5000), 1000u);
    EXPECT_EQ(shortest_timeout(1000, 1000), 1000u);
}

}  // namespace
