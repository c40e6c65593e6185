// Which Redis errors the store retries, and the schedule of its attempts.
#include <gtest/gtest.h>

#include "redis/retry.hpp"

using idem::redis::is_transient_error;
using idem::redis::renewing_max_delay_ms;
using idem::redis::Retry;
using idem::redis::retry_window_ms;

TEST(TransientError, RefusalsThatPassAreRetried)
{
    EXPECT_TRUE(is_transient_error("LOADING Redis is loading the dataset in memory"));
    EXPECT_TRUE(is_transient_error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."));
    EXPECT_TRUE(is_transient_error("OOM command not allowed when used memory > 'maxmemory'."));
    EXPECT_TRUE(is_transient_error("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."));
    EXPECT_TRUE(is_transient_error("READONLY You can't write against a read only replica."));
    EXPECT_TRUE(is_transient_error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
    EXPECT_TRUE(is_transient_error("NOREPLICAS Not enough good replicas to write."));
    EXPECT_TRUE(is_transient_error("CLUSTERDOWN The cluster is down"));
    EXPECT_TRUE(is_transient_error("TRYAGAIN Multiple keys request during rehashing of slot"));
    EXPECT_TRUE(is_transient_error("OOM"));
}

TEST(TransientError, RaisedInsideAScript)
{
    // Redis 7: the error of the command the script called, as it is
    EXPECT_TRUE(is_transient_error("OOM command not allowed when used memory > 'maxmemory'. script: "
                                   "ae3467fcdeb040f89bcec55e6543a4593cf7396a, on @user_script:1."));
    EXPECT_TRUE(is_transient_error("READONLY You can't write against a read only replica. script: "
                                   "ae3467fcdeb040f89bcec55e6543a4593cf7396a, on @user_script:1."));
    // Redis 6: wrapped
    EXPECT_TRUE(is_transient_error("ERR Error running script (call to f_ae3467fcdeb040f89bcec55e6543a4593cf7396a): "
                                   "@user_script:1: @user_script: 1: -OOM command not allowed when used memory > "
                                   "'maxmemory'."));
    EXPECT_TRUE(is_transient_error("ERR Error running script (call to f_ae34): @user_script:1: @user_script: 1: "
                                   "-READONLY You can't write against a read only replica."));
    EXPECT_FALSE(is_transient_error("ERR Error running script (call to f_ae34): @user_script:1: "
                                    "WRONGTYPE Operation against a key holding the wrong kind of value"));
}

TEST(TransientError, OthersAreNot)
{
    EXPECT_FALSE(is_transient_error("WRONGTYPE Operation against a key holding the wrong kind of value"));
    EXPECT_FALSE(is_transient_error("NOSCRIPT No matching script. Please use EVAL."));
    EXPECT_FALSE(is_transient_error("NOPERM this user has no permissions to run the 'evalsha' command"));
    EXPECT_FALSE(is_transient_error("ERR unknown command 'EVALSHA'"));
    EXPECT_FALSE(is_transient_error("BUSYKEY Target key name already exists."));
    EXPECT_FALSE(is_transient_error("OOMX"));
    EXPECT_FALSE(is_transient_error("ERR OOM"));
    EXPECT_FALSE(is_transient_error(""));
    EXPECT_FALSE(is_transient_error("ERR Error running script"));
}

TEST(RetryWindow, AResponseIsTriedForTheLockAndAtLeastTwentySeconds)
{
    EXPECT_EQ(retry_window_ms(30000, true), 30000u);
    EXPECT_EQ(retry_window_ms(300000, true), 300000u);
    EXPECT_EQ(retry_window_ms(1000, true), 20000u);
    // a release (or a renewal) is moot once the claim has expired by itself
    EXPECT_EQ(retry_window_ms(1000, false), 1000u);
    EXPECT_EQ(renewing_max_delay_ms(30000), 10000u);
    EXPECT_EQ(renewing_max_delay_ms(900), 300u);
    EXPECT_EQ(renewing_max_delay_ms(2), 1u);
}

TEST(Retry, WaitsDoubleFromAHundredMillisecondsToOneSecond)
{
    Retry retry;
    std::uint64_t now = 5000, wait = 0;
    std::uint64_t expected[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (std::uint64_t e : expected) {
        ASSERT_TRUE(retry.next(now, 20000, 10000, wait));
        EXPECT_EQ(wait, e);
        now += wait;
    }
    EXPECT_EQ(retry.failures, 7u);
    EXPECT_EQ(retry.started, 5000u);
    EXPECT_EQ(retry.deadline, 25000u);
}

TEST(Retry, NoWaitLongerThanTheRenewalInterval)
{
    Retry retry;
    std::uint64_t now = 0, wait = 0;
    for (int i = 0; i < 6; i++) {
        ASSERT_TRUE(retry.next(now, 20000, renewing_max_delay_ms(900), wait));
        EXPECT_LE(wait, 300u);
        now += wait;
    }
    EXPECT_EQ(wait, 300u);
}

TEST(Retry, GivesUpOnceTheWindowIsOver)
{
    Retry retry;
    std::uint64_t now = 0, wait = 0;
    unsigned attempts = 0;
    while (retry.next(now, 3000, 1000, wait)) {
        attempts++;
        now += wait;
        ASSERT_LE(now, 3000u);  // the last attempt is at the deadline, not after
    }
    EXPECT_EQ(now, 3000u);
    EXPECT_EQ(attempts, 6u);  // 100 + 200 + 400 + 800 + 1000 + 500
}

TEST(Retry, AnEmptyWindowGivesUpAtOnce)
{
    Retry retry;
    std::uint64_t wait = 0;
    EXPECT_FALSE(retry.next(100, 0, 1000, wait));
}

TEST(OutOfMemory, OomAsItIsOrReportedByAScript)
{
    using idem::redis::is_out_of_memory;
    EXPECT_TRUE(is_out_of_memory("OOM command not allowed when used memory > 'maxmemory'."));
    EXPECT_TRUE(is_out_of_memory("ERR Error running script (call to f_0123): @user_script:1: "
                                 "@user_script: 1: -OOM command not allowed when used memory > 'maxmemory'."));
    EXPECT_FALSE(is_out_of_memory("LOADING Redis is loading the dataset in memory"));
    EXPECT_FALSE(is_out_of_memory("ERR OOM"));
    EXPECT_FALSE(is_out_of_memory("OOMX not a code"));
    EXPECT_FALSE(is_out_of_memory(""));
}

TEST(Retry, AFailureCountedForAnotherScheduleKeepsWhenTheFirstCame)
{
    Retry retry;
    retry.count_failure(700);
    retry.count_failure(1700);
    EXPECT_EQ(retry.failures, 2u);
    EXPECT_EQ(retry.started, 700u);
    // and a store first retried on the backoff keeps its first failure too
    Retry backoff;
    std::uint64_t wait = 0;
    ASSERT_TRUE(backoff.next(100, 20000, 1000, wait));
    backoff.count_failure(5000);
    EXPECT_EQ(backoff.started, 100u);
    EXPECT_EQ(backoff.failures, 2u);
}

TEST(KeptStore, ItsClaimsLifeIsCountedDownToNothing)
{
    using idem::redis::kept_life_left;
    EXPECT_EQ(kept_life_left(3600000, 1000), 3599000u);
    EXPECT_EQ(kept_life_left(3600000, 3600000), 0u);
    EXPECT_EQ(kept_life_left(3600000, 3600001), 0u);
    // tried once a second: about a second from Redis taking writes again
    EXPECT_EQ(idem::redis::oom_probe_interval_ms, 1000u);
}

TEST(HoldBudget, RecordsAreHeldUpToTheLimitAndNoByteBeyond)
{
    idem::redis::HoldBudget budget(1000);
    EXPECT_TRUE(budget.take(600));
    EXPECT_TRUE(budget.take(400));  // exactly the limit
    EXPECT_FALSE(budget.take(1));   // not one byte more: the marker instead
    EXPECT_EQ(budget.held(), 1000u);
    budget.give_back(400);
    EXPECT_FALSE(budget.take(401));
    EXPECT_TRUE(budget.take(400));
    EXPECT_FALSE(budget.take(static_cast<std::size_t>(-1)));  // no overflow past the limit
    EXPECT_EQ(budget.held(), 1000u);
}

TEST(HoldBudget, ALimitOfNothingHoldsNothing)
{
    idem::redis::HoldBudget budget(0);
    EXPECT_FALSE(budget.take(1));
    EXPECT_TRUE(budget.take(0));
    EXPECT_EQ(budget.held(), 0u);
}

TEST(HoldBudget, ALimitLoweredBelowWhatIsHeldHoldsNothingMore)
{
    idem::redis::HoldBudget budget(1000);
    ASSERT_TRUE(budget.take(800));
    budget.set_limit(500);
    EXPECT_FALSE(budget.take(0));
    EXPECT_FALSE(budget.take(1));
    budget.give_back(800);
    EXPECT_EQ(budget.held(), 0u);
    EXPECT_TRUE(budget.take(500));
    budget.give_back(9999);  // never below nothing
    EXPECT_EQ(budget.held(), 0u);
}
