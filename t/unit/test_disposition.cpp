// test_disposition.cpp — judge_response and judge_unfinished: when a claimed
// request's response is stored, its key released, or kept unreplayable.
#include <gtest/gtest.h>

#include "disposition.hpp"

namespace {

using idem::Disposition;
using idem::judge_response;
using idem::judge_unfinished;
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
