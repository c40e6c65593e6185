// test_replayable.cpp — what a response must be to be sent again: the rule
// the capture applies (replayable.hpp) is the decoder's (record.hpp), flaw
// for flaw; the marker's reasons, and the problem documents that tell them.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "outcome.hpp"
#include "record.hpp"
#include "replayable.hpp"

namespace {

using idem::Header;
using idem::MarkerWhy;
using idem::RecordFlaw;

// The flaw the decoder finds in a stored response of these parts.
RecordFlaw decoded_flaw(unsigned status, const std::vector<Header>& headers, const std::vector<Header>& trailers = {})
{
    idem::ResponseExtras extras{0, trailers.data(), trailers.size()};
    std::string out(idem::response_size(headers.data(), headers.size(), 1, extras), '?');
    char* body = idem::encode_response_head(out.data(), idem::Digest{}, static_cast<std::uint16_t>(status),
                                            headers.data(), headers.size(), 1, extras);
    EXPECT_NE(body, nullptr);
    *body = 'x';
    idem::encode_response_tail(body + 1, extras);
    RecordFlaw flaw = RecordFlaw::none;
    idem::decode_record(out, &flaw);
    return flaw;
}

TEST(Replayable, StatusesOfAFinalAnswer)
{
    for (unsigned status : {100u, 101u, 103u, 199u, 600u, 601u, 999u, 0u}) {
        EXPECT_FALSE(idem::replayable_status(status)) << status;
        EXPECT_EQ(idem::response_flaw(status, nullptr, 0), RecordFlaw::status) << status;
    }
    for (unsigned status : {200u, 201u, 204u, 304u, 404u, 451u, 500u, 599u}) {
        EXPECT_TRUE(idem::replayable_status(status)) << status;
        EXPECT_EQ(idem::response_flaw(status, nullptr, 0), RecordFlaw::none) << status;
    }
}

TEST(Replayable, HeaderNamesAndValues)
{
    EXPECT_EQ(idem::header_flaw({"X-Ok_1!#$%&'*+-.^`|~", "any value, \t with spaces"}), RecordFlaw::none);
    for (std::string_view name : std::initializer_list<std::string_view>{"", "Bad Name", "Bad(Name)", "Na\"me", "a:b", "Nam@e", "X\x7f", "X\xc3\xa9",
                                  std::string_view("X\0Y", 3), "X\tY", "X/Y", "[X]", "{X}", "X,Y", "X;Y", "X=Y",
                                  "X?Y", "X\\Y"}) {
        EXPECT_EQ(idem::header_flaw({name, "v"}), RecordFlaw::header_name) << name;
    }
    for (std::string_view value : std::initializer_list<std::string_view>{"a\rb", "a\nb", std::string_view("a\0b", 3), "\r\n", "end\n"}) {
        EXPECT_EQ(idem::header_flaw({"X", value}), RecordFlaw::header_value);
    }
    // the name is looked at first
    EXPECT_EQ(idem::header_flaw({"B d", "a\nb"}), RecordFlaw::header_name);
}

TEST(Replayable, FirstFlawOfAResponse)
{
    const std::vector<Header> good = {{"Content-Type", "text/plain"}, {"X-A", "1"}};
    const std::vector<Header> bad_name = {{"Content-Type", "text/plain"}, {"X A", "1"}};
    const std::vector<Header> bad_value = {{"X-A", "1\r\nSet-Cookie: x=1"}};
    EXPECT_EQ(idem::response_flaw(201, good.data(), good.size()), RecordFlaw::none);
    EXPECT_EQ(idem::response_flaw(201, bad_name.data(), bad_name.size()), RecordFlaw::header_name);
    EXPECT_EQ(idem::response_flaw(201, bad_value.data(), bad_value.size()), RecordFlaw::header_value);
    EXPECT_EQ(idem::response_flaw(700, bad_name.data(), bad_name.size()), RecordFlaw::status);
    EXPECT_EQ(idem::response_flaw(200, good.data(), good.size(), bad_value.data(), bad_value.size()),
              RecordFlaw::header_value);
    EXPECT_EQ(idem::headers_flaw(bad_name.data(), bad_name.size()), RecordFlaw::header_name);
    EXPECT_EQ(idem::headers_flaw(nullptr, 0), RecordFlaw::none);
}

// One rule: whatever the capture finds is what the decoder would find.
TEST(Replayable, TheCapturesRuleIsTheDecoders)
{
    const std::vector<std::vector<Header>> header_sets = {
        {}, {{"A", "b"}}, {{"A b", "c"}}, {{"A", "b\nc"}}, {{"A", std::string_view("b\0", 2)}},
        {{"Ok", "v"}, {"", "v"}}, {{"Ok", "v"}, {"X(", "v"}}};
    for (unsigned status : {100u, 199u, 200u, 404u, 599u, 600u, 999u}) {
        for (const auto& headers : header_sets) {
            for (const auto& trailers : header_sets) {
                EXPECT_EQ(idem::response_flaw(status, headers.data(), headers.size(), trailers.data(),
                                              trailers.size()),
                          decoded_flaw(status, headers, trailers))
                    << status << " " << headers.size() << " " << trailers.size();
            }
        }
    }
}

TEST(Replayable, MarkerReasons)
{
    EXPECT_EQ(idem::marker_why(RecordFlaw::status), MarkerWhy::bad_status);
    EXPECT_EQ(idem::marker_why(RecordFlaw::header_name), MarkerWhy::bad_header_name);
    EXPECT_EQ(idem::marker_why(RecordFlaw::header_value), MarkerWhy::bad_header_value);
    for (RecordFlaw flaw : {RecordFlaw::none, RecordFlaw::newer_version, RecordFlaw::compressed, RecordFlaw::damaged}) {
        EXPECT_EQ(idem::marker_why(flaw), MarkerWhy::unsaid);
    }
    EXPECT_EQ(idem::marker_reason(MarkerWhy::unsaid), nullptr);
    EXPECT_EQ(idem::marker_reason(static_cast<MarkerWhy>(77)), nullptr);  // a later release's
    const idem::Problem plain = idem::outcome_info(idem::Outcome::unreplayable).problem;
    for (MarkerWhy why : {MarkerWhy::bad_status, MarkerWhy::bad_header_name, MarkerWhy::bad_header_value}) {
        const char* reason = idem::marker_reason(why);
        ASSERT_NE(reason, nullptr);
        for (const char* c = reason; *c != '\0'; c++) {
            EXPECT_TRUE(*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\') << reason;  // safe in JSON and a log
        }
        // the 410's document: the same type and title, a detail that names the reason
        const idem::Problem p = idem::unreplayable_problem(why);
        EXPECT_EQ(p.type, plain.type);
        EXPECT_EQ(p.title, plain.title);
        EXPECT_NE(p.detail, plain.detail);
        EXPECT_NE(p.detail.find(reason), std::string_view::npos) << p.detail;
        EXPECT_EQ(p.detail.find('"'), std::string_view::npos);
    }
    for (MarkerWhy why : {MarkerWhy::unsaid, static_cast<MarkerWhy>(77)}) {
        const idem::Problem p = idem::unreplayable_problem(why);
        EXPECT_EQ(p.detail, plain.detail);
    }
}

}  // namespace
