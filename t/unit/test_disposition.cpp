// test_disposition.cpp — judge_response and judge_unfinished: when a claimed
// request's response is stored, its key released, or kept unreplayable;
// the statuses that say a request was not executed.
#include <gtest/gtest.h>

#include <cstring>

#include "disposition.hpp"

namespace {

using idem::Disposition;
using idem::judge_response;
using idem::judge_unfinished;
using idem::parse_release_status;
using idem::ReleaseStatuses;
using idem::ResponseFacts;
using idem::UpstreamFacts;

UpstreamFacts reached_once()
{
    UpstreamFacts u;
    u.attempted = true;
    u.reached = true;
    return u;
}

ResponseFacts upstream_answer(unsigned status, UpstreamFacts u = reached_once())
{
    ResponseFacts f;
    f.status = status;
    f.from_upstream = true;
    f.upstream = u;
    return f;
}

ResponseFacts nginx_answer(unsigned status, UpstreamFacts u)
{
    ResponseFacts f;
    f.status = status;
    f.upstream = u;
    return f;
}

TEST(Disposition, UpstreamAnswerIsStored)
{
    EXPECT_EQ(judge_response(upstream_answer(201)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(upstream_answer(404)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(upstream_answer(401)).disposition, Disposition::store);
}

TEST(Disposition, UpstreamFiveHundredReleasesUnlessStoreErrors)
{
    EXPECT_EQ(judge_response(upstream_answer(500)).disposition, Disposition::release);
    ResponseFacts f = upstream_answer(503);
    f.store_errors = true;
    EXPECT_EQ(judge_response(f).disposition, Disposition::store);
}

TEST(Disposition, NeverReachedReleasesWhateverAnswers)
{
    UpstreamFacts refused;
    refused.attempted = true;
    EXPECT_EQ(judge_response(nginx_answer(502, refused)).disposition, Disposition::release);
    // error_page 502 =200 @fallback: the fallback is not the key's response
    EXPECT_EQ(judge_response(nginx_answer(200, refused)).disposition, Disposition::release);
}

TEST(Disposition, PeerThatTimedOutThenPeerThatRefusedKeepsTheKey)
{
    // proxy_next_upstream: the first peer got the request and went silent,
    // the second refused the connection; nginx answers 502
    UpstreamFacts u = reached_once();
    u.silent = true;
    EXPECT_EQ(judge_response(nginx_answer(502, u)).disposition, Disposition::unreplayable);
    EXPECT_EQ(judge_response(nginx_answer(504, u)).disposition, Disposition::unreplayable);
}

TEST(Disposition, FallbackAfterAReachedPeerFailedIsNotStored)
{
    UpstreamFacts u = reached_once();
    u.silent = true;
    EXPECT_EQ(judge_response(nginx_answer(200, u)).disposition, Disposition::unreplayable);
    ResponseFacts f = nginx_answer(200, u);
    f.store_errors = true;
    EXPECT_EQ(judge_response(f).disposition, Disposition::unreplayable);
}

TEST(Disposition, NextPeerAnswersAfterASilentOne)
{
    UpstreamFacts u = reached_once();
    u.silent = true;
    EXPECT_EQ(judge_response(upstream_answer(201, u)).disposition, Disposition::store);
    // its 5xx cannot free the key: the silent peer may have executed it
    EXPECT_EQ(judge_response(upstream_answer(502, u)).disposition, Disposition::unreplayable);
}

TEST(Disposition, EveryPeerAnsweredFiveHundredReleases)
{
    UpstreamFacts u = reached_once();
    u.failed = true;
    EXPECT_EQ(judge_response(upstream_answer(502, u)).disposition, Disposition::release);
    EXPECT_EQ(judge_response(nginx_answer(502, u)).disposition, Disposition::release);
}

TEST(Disposition, HandedOverByTheUpstreamIsStored)
{
    // X-Accel-Redirect, or an intercepted 404 answered by error_page
    UpstreamFacts u = reached_once();
    u.answered = true;
    EXPECT_EQ(judge_response(nginx_answer(200, u)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(nginx_answer(404, u)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(nginx_answer(500, u)).disposition, Disposition::unreplayable);
}

TEST(Disposition, NoUpstreamAtAll)
{
    UpstreamFacts none;
    EXPECT_EQ(judge_response(nginx_answer(200, none)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(nginx_answer(500, none)).disposition, Disposition::release);
    ResponseFacts f = nginx_answer(500, none);
    f.store_errors = true;
    EXPECT_EQ(judge_response(f).disposition, Disposition::store);
}

TEST(Disposition, EveryVerdictButStoreSaysWhy)
{
    UpstreamFacts refused;
    refused.attempted = true;
    EXPECT_NE(judge_response(nginx_answer(502, refused)).why, nullptr);
    EXPECT_EQ(judge_response(upstream_answer(200)).why, nullptr);
}

const ReleaseStatuses not_executed = ReleaseStatuses::of({401, 403, 408, 425, 429});

ResponseFacts with_release(ResponseFacts f)
{
    f.release = not_executed;
    return f;
}

TEST(ReleaseStatuses, HoldsOnlyFourHundreds)
{
    ReleaseStatuses set;
    EXPECT_FALSE(set.contains(429));
    EXPECT_TRUE(set.add(400));
    EXPECT_TRUE(set.add(463));  // across the two words of the set
    EXPECT_TRUE(set.add(499));
    EXPECT_FALSE(set.add(399));
    EXPECT_FALSE(set.add(500));
    EXPECT_FALSE(set.add(0));
    EXPECT_TRUE(set.contains(400));
    EXPECT_TRUE(set.contains(463));
    EXPECT_TRUE(set.contains(499));
    EXPECT_FALSE(set.contains(464));
    EXPECT_FALSE(set.contains(399));
    EXPECT_FALSE(set.contains(500));
    EXPECT_FALSE(set.contains(528));  // 400 + 128: no wrap-around
    EXPECT_TRUE(not_executed.contains(401));
    EXPECT_FALSE(not_executed.contains(404));
}

TEST(ReleaseStatuses, ParsesThreeDigitFourHundreds)
{
    EXPECT_EQ(parse_release_status("429"), 429u);
    EXPECT_EQ(parse_release_status("400"), 400u);
    EXPECT_EQ(parse_release_status("499"), 499u);
    EXPECT_EQ(parse_release_status("500"), 0u);
    EXPECT_EQ(parse_release_status("399"), 0u);
    EXPECT_EQ(parse_release_status("0429"), 0u);
    EXPECT_EQ(parse_release_status("42"), 0u);
    EXPECT_EQ(parse_release_status("4x9"), 0u);
    EXPECT_EQ(parse_release_status("+42"), 0u);
    EXPECT_EQ(parse_release_status(""), 0u);
    EXPECT_EQ(parse_release_status("off"), 0u);
}

TEST(Disposition, NotExecutedStatusReleasesAndSaysWhich)
{
    for (unsigned status : {401u, 403u, 408u, 425u, 429u}) {
        idem::Verdict v = judge_response(with_release(upstream_answer(status)));
        EXPECT_EQ(v.disposition, Disposition::release) << status;
    }
    EXPECT_STREQ(judge_response(with_release(upstream_answer(429))).why, "the upstream answered 429: not executed");
    EXPECT_STREQ(judge_response(with_release(upstream_answer(401))).why, "the upstream answered 401: not executed");
}

TEST(Disposition, OtherFourHundredsAreAnswers)
{
    for (unsigned status : {400u, 404u, 409u, 422u}) {
        EXPECT_EQ(judge_response(with_release(upstream_answer(status))).disposition, Disposition::store) << status;
    }
}

TEST(Disposition, AnEmptyListStoresEveryFourHundred)
{
    // idempotency_release_statuses off
    EXPECT_EQ(judge_response(upstream_answer(429)).disposition, Disposition::store);
}

TEST(Disposition, StoreErrorsDoesNotKeepANotExecutedStatus)
{
    ResponseFacts f = with_release(upstream_answer(429));
    f.store_errors = true;
    EXPECT_EQ(judge_response(f).disposition, Disposition::release);
}

TEST(Disposition, NotExecutedAfterAPeerThatMayHaveExecutedKeepsTheKey)
{
    // proxy_next_upstream: the first peer went silent (or answered), the
    // next one answers 429: the first may have executed it
    UpstreamFacts silent = reached_once();
    silent.silent = true;
    idem::Verdict v = judge_response(with_release(upstream_answer(429, silent)));
    EXPECT_EQ(v.disposition, Disposition::unreplayable);
    EXPECT_STREQ(v.why, "the upstream answered 429 after another peer may have executed it");
    UpstreamFacts answered = reached_once();
    answered.answered = true;
    EXPECT_EQ(judge_response(with_release(upstream_answer(408, answered))).disposition, Disposition::unreplayable);
}

TEST(Disposition, PeersThatDeclinedDoNotKeepTheKey)
{
    // proxy_next_upstream http_429: every peer said 429, or the last one 503
    UpstreamFacts declined = reached_once();
    declined.declined = true;
    EXPECT_EQ(judge_response(with_release(upstream_answer(429, declined))).disposition, Disposition::release);
    EXPECT_EQ(judge_response(with_release(upstream_answer(503, declined))).disposition, Disposition::release);
    // ... and a peer that answers after them is stored
    EXPECT_EQ(judge_response(with_release(upstream_answer(201, declined))).disposition, Disposition::store);
    // an intercepted 429 answered by an error_page fallback is not the key's response
    EXPECT_EQ(judge_response(with_release(nginx_answer(200, declined))).disposition, Disposition::release);
}

TEST(Disposition, NginxAnswersANotExecutedStatus)
{
    UpstreamFacts none;
    idem::Verdict v = judge_response(with_release(nginx_answer(429, none)));
    EXPECT_EQ(v.disposition, Disposition::release);
    EXPECT_STREQ(v.why, "the location answered 429: not executed");
    // after an upstream handed over (X-Accel-Redirect): it may have executed it
    UpstreamFacts answered = reached_once();
    answered.answered = true;
    EXPECT_EQ(judge_response(with_release(nginx_answer(403, answered))).disposition, Disposition::unreplayable);
    UpstreamFacts silent = reached_once();
    silent.silent = true;
    EXPECT_EQ(judge_response(with_release(nginx_answer(429, silent))).disposition, Disposition::unreplayable);
}

TEST(Disposition, UnfinishedRequest)
{
    UpstreamFacts none;
    EXPECT_EQ(judge_unfinished(none, false).disposition, Disposition::release);
    EXPECT_EQ(judge_unfinished(none, true).disposition, Disposition::unreplayable);
    EXPECT_EQ(judge_unfinished(reached_once(), false).disposition, Disposition::unreplayable);
    UpstreamFacts refused;
    refused.attempted = true;
    EXPECT_EQ(judge_unfinished(refused, false).disposition, Disposition::release);
}

}  // namespace
