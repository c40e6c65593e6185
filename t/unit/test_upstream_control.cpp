// test_upstream_control.cpp — the upstream's header read as a list of
// directives (parse_upstream_control, UpstreamControlParser), and what
// judge_response makes of what it asked.
#include <gtest/gtest.h>

#include "disposition.hpp"
#include "upstream_control.hpp"

namespace {

using idem::ControlProblem;
using idem::Disposition;
using idem::judge_response;
using idem::max_ttl_s;
using idem::parse_upstream_control;
using idem::ResponseFacts;
using idem::StorageAsk;
using idem::UpstreamControl;
using idem::UpstreamControlParser;
using idem::UpstreamFacts;

TEST(UpstreamControl, EachDirective)
{
    EXPECT_EQ(parse_upstream_control("no-store").storage, StorageAsk::no_store);
    EXPECT_EQ(parse_upstream_control("store").storage, StorageAsk::store);
    UpstreamControl c = parse_upstream_control("ttl=600");
    EXPECT_EQ(c.storage, StorageAsk::config);
    EXPECT_EQ(c.ttl_s, 600u);
    EXPECT_EQ(c.problem, ControlProblem::none);
    EXPECT_EQ(c.problems, 0u);
}

TEST(UpstreamControl, CaseAndWhitespaceAndEmptyElements)
{
    UpstreamControl c = parse_upstream_control("  STORE ,\tTtl = 600 ,, ");
    EXPECT_EQ(c.storage, StorageAsk::store);
    EXPECT_EQ(c.ttl_s, 600u);
    EXPECT_EQ(c.problems, 0u);
    EXPECT_EQ(parse_upstream_control("No-Store").storage, StorageAsk::no_store);
    EXPECT_EQ(parse_upstream_control("").storage, StorageAsk::config);
    EXPECT_EQ(parse_upstream_control(",").problems, 0u);
}

TEST(UpstreamControl, QuotedTtl)
{
    EXPECT_EQ(parse_upstream_control("ttl=\"604800\"").ttl_s, 604800u);
    EXPECT_EQ(parse_upstream_control("ttl=\"\"").problem, ControlProblem::bad_ttl);
}

TEST(UpstreamControl, BadTtlIsIgnoredTheRestKept)
{
    for (const char* v : {"store, ttl=0", "store, ttl=-5", "store, ttl=abc", "store, ttl=", "store, ttl",
                          "store, ttl=1.5", "store, ttl=+3", "store, ttl=1 0"}) {
        UpstreamControl c = parse_upstream_control(v);
        EXPECT_EQ(c.storage, StorageAsk::store) << v;
        EXPECT_EQ(c.ttl_s, 0u) << v;
        EXPECT_EQ(c.problem, ControlProblem::bad_ttl) << v;
        EXPECT_EQ(c.problems, 1u) << v;
    }
    EXPECT_EQ(parse_upstream_control("store, ttl=abc").problem_at, "ttl=abc");
}

TEST(UpstreamControl, TtlCappedAt365Days)
{
    EXPECT_EQ(max_ttl_s, 31536000u);
    UpstreamControl c = parse_upstream_control("store, ttl=31536001");
    EXPECT_EQ(c.storage, StorageAsk::store);
    EXPECT_EQ(c.ttl_s, max_ttl_s);
    EXPECT_EQ(c.problem, ControlProblem::ttl_capped);
    c = parse_upstream_control("ttl=604800000");  // milliseconds by mistake
    EXPECT_EQ(c.ttl_s, max_ttl_s);
    c = parse_upstream_control("ttl=99999999999999999999999999999999");
    EXPECT_EQ(c.ttl_s, max_ttl_s);
    c = parse_upstream_control("ttl=31536000");
    EXPECT_EQ(c.ttl_s, max_ttl_s);
    EXPECT_EQ(c.problems, 0u);
}

TEST(UpstreamControl, UnknownDirectivesAndValuesIgnored)
{
    UpstreamControl c = parse_upstream_control("max-age=5, no-store, private");
    EXPECT_EQ(c.storage, StorageAsk::no_store);
    EXPECT_EQ(c.problem, ControlProblem::unknown_directive);
    EXPECT_EQ(c.problem_at, "max-age=5");
    EXPECT_EQ(c.problems, 2u);

    c = parse_upstream_control("store=yes, ttl=60");
    EXPECT_EQ(c.storage, StorageAsk::config);
    EXPECT_EQ(c.ttl_s, 60u);
    EXPECT_EQ(c.problem, ControlProblem::unexpected_value);

    EXPECT_EQ(parse_upstream_control("nostore").problem, ControlProblem::unknown_directive);
    EXPECT_EQ(parse_upstream_control("no-store;x").problem, ControlProblem::unknown_directive);
    EXPECT_EQ(parse_upstream_control("\"store\"").problem, ControlProblem::unknown_directive);
}

TEST(UpstreamControl, ContradictionIgnoresTheWholeHeader)
{
    UpstreamControl c = parse_upstream_control("store, no-store, ttl=600");
    EXPECT_EQ(c.storage, StorageAsk::config);
    EXPECT_EQ(c.ttl_s, 0u);
    EXPECT_EQ(c.problem, ControlProblem::contradiction);
}

TEST(UpstreamControl, TwoDifferentTtlsAreIgnoredTheSameTwiceKept)
{
    UpstreamControl c = parse_upstream_control("ttl=60, store, ttl=120");
    EXPECT_EQ(c.storage, StorageAsk::store);
    EXPECT_EQ(c.ttl_s, 0u);
    EXPECT_EQ(c.problem, ControlProblem::conflicting_ttl);
    c = parse_upstream_control("ttl=60, ttl=120, ttl=180");
    EXPECT_EQ(c.problems, 1u);
    c = parse_upstream_control("ttl=60, ttl=60");
    EXPECT_EQ(c.ttl_s, 60u);
    EXPECT_EQ(c.problems, 0u);
}

TEST(UpstreamControl, SeveralHeadersReadAsOneList)
{
    UpstreamControlParser p;
    p.add("store");
    p.add("ttl=600");
    UpstreamControl c = p.result();
    EXPECT_EQ(c.storage, StorageAsk::store);
    EXPECT_EQ(c.ttl_s, 600u);

    UpstreamControlParser q;
    q.add("no-store");
    q.add("Store");
    EXPECT_EQ(q.result().problem, ControlProblem::contradiction);
    EXPECT_EQ(q.result().storage, StorageAsk::config);
}

TEST(UpstreamControl, TheFirstProblemIsReported)
{
    UpstreamControl c = parse_upstream_control("ttl=x, foo, store=1");
    EXPECT_EQ(c.problem, ControlProblem::bad_ttl);
    EXPECT_EQ(c.problem_at, "ttl=x");
    EXPECT_EQ(c.problems, 3u);
    for (auto p : {ControlProblem::unknown_directive, ControlProblem::unexpected_value, ControlProblem::bad_ttl,
                   ControlProblem::conflicting_ttl, ControlProblem::ttl_capped, ControlProblem::contradiction}) {
        EXPECT_STRNE(idem::describe(p), "?");
    }
}

ResponseFacts answer(unsigned status, StorageAsk asked, UpstreamFacts u = {})
{
    ResponseFacts f;
    f.status = status;
    f.from_upstream = true;
    f.asked = asked;
    u.attempted = true;
    u.reached = true;
    f.upstream = u;
    f.release.add(429);
    return f;
}

TEST(UpstreamControl, NoStoreReleasesAnyAnswer)
{
    for (unsigned status : {200u, 201u, 409u, 402u, 429u, 500u}) {
        EXPECT_EQ(judge_response(answer(status, StorageAsk::no_store)).disposition, Disposition::release) << status;
    }
}

TEST(UpstreamControl, NoStoreAfterAnotherPeerMayHaveExecutedIsUnreplayable)
{
    UpstreamFacts u;
    u.silent = true;
    EXPECT_EQ(judge_response(answer(409, StorageAsk::no_store, u)).disposition, Disposition::unreplayable);
}

TEST(UpstreamControl, StoreKeepsErrorsAndReleaseStatuses)
{
    EXPECT_EQ(judge_response(answer(502, StorageAsk::config)).disposition, Disposition::release);
    EXPECT_EQ(judge_response(answer(502, StorageAsk::store)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(answer(503, StorageAsk::store)).disposition, Disposition::store);
    EXPECT_EQ(judge_response(answer(429, StorageAsk::config)).disposition, Disposition::release);
    EXPECT_EQ(judge_response(answer(429, StorageAsk::store)).disposition, Disposition::store);
}

TEST(UpstreamControl, NeverReachedReleasesWhateverWasAsked)
{
    ResponseFacts f = answer(502, StorageAsk::store);
    f.upstream.reached = false;
    EXPECT_EQ(judge_response(f).disposition, Disposition::release);
}

TEST(UpstreamControl, HeededOnlyForTheUpstreamsOwnAnswer)
{
    ResponseFacts f = answer(200, StorageAsk::no_store);
    f.from_upstream = false;
    EXPECT_EQ(judge_response(f).disposition, Disposition::store);
    f = answer(502, StorageAsk::store);
    f.from_upstream = false;
    EXPECT_EQ(judge_response(f).disposition, Disposition::release);
}

}  // namespace
