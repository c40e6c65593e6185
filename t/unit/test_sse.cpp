// test_sse.cpp — resuming an event stream: which Content-Type is one, and
// where a client that reconnects with Last-Event-ID picks the stream up,
// line by line as an EventSource reads it.
#include <gtest/gtest.h>

#include <string>

#include "sse.hpp"

namespace {

using idem::is_event_stream;
using idem::sse_resume_offset;

// The offset just past the first occurrence of `part` in `body`.
std::size_t after(std::string_view body, std::string_view part)
{
    const std::size_t at = body.find(part);
    EXPECT_NE(at, std::string_view::npos) << part;
    return at + part.size();
}

TEST(SseContentType, EventStreams)
{
    EXPECT_TRUE(is_event_stream("text/event-stream"));
    EXPECT_TRUE(is_event_stream("text/event-stream; charset=utf-8"));
    EXPECT_TRUE(is_event_stream("text/event-stream;charset=utf-8"));
    EXPECT_TRUE(is_event_stream(" TEXT/Event-Stream "));
    EXPECT_TRUE(is_event_stream("\ttext/event-stream\t;\tcharset=utf-8"));
    EXPECT_TRUE(is_event_stream("text/event-stream;"));
}

TEST(SseContentType, OtherTypes)
{
    EXPECT_FALSE(is_event_stream("text/event-streams"));
    EXPECT_FALSE(is_event_stream("text/plain"));
    EXPECT_FALSE(is_event_stream(""));
    EXPECT_FALSE(is_event_stream(" "));
    EXPECT_FALSE(is_event_stream("text/event-strea"));
    EXPECT_FALSE(is_event_stream("text/event stream"));
    EXPECT_FALSE(is_event_stream("text / event-stream"));
    EXPECT_FALSE(is_event_stream("application/event-stream"));
    EXPECT_FALSE(is_event_stream("text/event-stream, text/plain"));
    EXPECT_FALSE(is_event_stream("\ntext/event-stream"));
    EXPECT_FALSE(is_event_stream("xtext/event-stream"));
}

TEST(SseResume, AfterTheEventThatSetTheId)
{
    const std::string body = "id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: c\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), after(body, "data: a\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "2"), after(body, "data: b\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "3"), body.size());
}

TEST(SseResume, EveryLineEnding)
{
    for (std::string_view eol : {"\n", "\r\n", "\r"}) {
        SCOPED_TRACE(eol == "\n" ? "LF" : eol == "\r" ? "CR" : "CRLF");
        const std::string e(eol);
        const std::string body = "data: a" + e + "id: 7" + e + e + "data: b" + e + "id: 8" + e + e + "data: c" + e;
        EXPECT_EQ(sse_resume_offset(body, "7"), after(body, "id: 7" + e + e));
        EXPECT_EQ(sse_resume_offset(body, "8"), after(body, "id: 8" + e + e));
    }
    // mixed in one stream
    const std::string mixed = "id: 1\r\n\rid: 2\r\r\nid: 3\n\r\n";
    EXPECT_EQ(sse_resume_offset(mixed, "1"), after(mixed, "id: 1\r\n\r"));
    EXPECT_EQ(sse_resume_offset(mixed, "2"), after(mixed, "id: 2\r\r\n"));
    EXPECT_EQ(sse_resume_offset(mixed, "3"), mixed.size());
}

TEST(SseResume, ACrLfIsOneLineEndNotTwo)
{
    // were "\r\n" two line ends, "id: 1\r\n" would end the event at once
    const std::string body = "id: 1\r\ndata: x\r\n\r\nid: 2\r\n\r\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), after(body, "data: x\r\n\r\n"));
}

TEST(SseResume, ACrAtTheVeryEndEndsItsLine)
{
    const std::string body = "id: 5\r\r";
    EXPECT_EQ(sse_resume_offset(body, "5"), body.size());
    // the same with the LF that may follow it
    EXPECT_EQ(sse_resume_offset(body + "\n", "5"), body.size() + 1);
    // the line "id: 5" ended by a CR at the end: the event's blank line is still to come
    EXPECT_EQ(sse_resume_offset("id: 5\r", "5"), 0u);
}

TEST(SseResume, ByteOrderMark)
{
    const std::string body = "\xEF\xBB\xBFid: 1\n\ndata: x\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), after(body, "id: 1\n\n"));
    // without it the first field's name would be "\xEF\xBB\xBFid"
    const std::string twice = "\xEF\xBB\xBF\xEF\xBB\xBFid: 1\n\nid: 2\n\n";
    EXPECT_EQ(sse_resume_offset(twice, "1"), 0u);  // only one BOM is skipped
    EXPECT_EQ(sse_resume_offset(twice, "2"), twice.size());
    // a BOM elsewhere is part of the line
    const std::string later = "data: x\n\n\xEF\xBB\xBFid: 1\n\n";
    EXPECT_EQ(sse_resume_offset(later, "1"), 0u);
}

TEST(SseResume, Comments)
{
    const std::string body = ":id: 1\n\n: id: 2\nid: 3\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), 0u);
    EXPECT_EQ(sse_resume_offset(body, "id: 2"), 0u);
    EXPECT_EQ(sse_resume_offset(body, "3"), body.size());
    // a comment-only event does not count; the event after it does
    const std::string keepalive = ": ping\n\nid: 4\n\n";
    EXPECT_EQ(sse_resume_offset(keepalive, "4"), keepalive.size());
}

TEST(SseResume, OneLeadingSpaceIsRemoved)
{
    const std::string body = "id:1\n\nid: 2\n\nid:  3\n\nid:\t4\n\nid: 5 \n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), after(body, "id:1\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "2"), after(body, "id: 2\n\n"));
    EXPECT_EQ(sse_resume_offset(body, " 3"), after(body, "id:  3\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "\t4"), after(body, "id:\t4\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "5 "), body.size());
}

// HTTP does not carry the spaces and tabs around a header's value: the id
// " 3" comes back as "3". An id is compared without them, and the first
// event whose id could be the one sent wins: events may be sent again,
// never skipped.
TEST(SseResume, SpacesAndTabsAroundAnIdAreNotCompared)
{
    const std::string body = "id:  3\n\nid:\t4\n\nid: 5 \n\n";
    EXPECT_EQ(sse_resume_offset(body, "3"), after(body, "id:  3\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "4"), after(body, "id:\t4\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "5"), body.size());
    EXPECT_EQ(sse_resume_offset(body, " \t3 "), after(body, "id:  3\n\n"));
    // " 7" first, then "7": a client at either resumes after the first
    const std::string twice = "id:  7\ndata: a\n\ndata: b\n\nid: 7\ndata: c\n\ndata: d\n\n";
    EXPECT_EQ(sse_resume_offset(twice, "7"), after(twice, "id:  7\ndata: a\n\n"));
    EXPECT_EQ(sse_resume_offset(twice, " 7"), after(twice, "id:  7\ndata: a\n\n"));
    // an id of spaces alone is no id
    EXPECT_EQ(sse_resume_offset("id:   \n\n", " "), 0u);
}

TEST(SseResume, TheValueIsAfterTheFirstColon)
{
    const std::string body = "id: a:b\n\n";
    EXPECT_EQ(sse_resume_offset(body, "a:b"), body.size());
    EXPECT_EQ(sse_resume_offset(body, "b"), 0u);
}

TEST(SseResume, FieldNamesAreExact)
{
    const std::string body = "ID: 1\n\nid : 2\n\n id: 3\n\nidx: 4\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), 0u);
    EXPECT_EQ(sse_resume_offset(body, "2"), 0u);
    EXPECT_EQ(sse_resume_offset(body, "3"), 0u);
    EXPECT_EQ(sse_resume_offset(body, "4"), 0u);
    // data, event and retry never set the id
    const std::string others = "data: 1\nevent: 1\nretry: 1\n\n";
    EXPECT_EQ(sse_resume_offset(others, "1"), 0u);
}

TEST(SseResume, ALineWithoutColonIsAnEmptyValue)
{
    // "id" alone sets the id to empty, which no Last-Event-ID matches
    const std::string body = "id: 1\nid\n\nid: 1\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), body.size());
    EXPECT_EQ(sse_resume_offset(body, ""), 0u);
    // "id:" likewise
    const std::string colon = "id: 1\nid:\n\n";
    EXPECT_EQ(sse_resume_offset(colon, "1"), 0u);
}

TEST(SseResume, AnIdWithNulIsIgnored)
{
    const std::string body = std::string("id: 1\n\nid: 2\nid: x\0y\n\n", 22);
    ASSERT_EQ(body.size(), 22u);
    // the ignored id leaves the event's "2" standing
    EXPECT_EQ(sse_resume_offset(body, "2"), body.size());
    EXPECT_EQ(sse_resume_offset(body, std::string("x\0y", 3)), 0u);
    EXPECT_EQ(sse_resume_offset(body, "x"), 0u);
    const std::string alone = std::string("id: \0\n\n", 7);
    EXPECT_EQ(sse_resume_offset(alone, std::string(1, '\0')), 0u);
}

TEST(SseResume, TheLastIdOfAnEventCounts)
{
    const std::string body = "id: 1\nid: 2\n\nid: 2\nid: 1\n\n";
    EXPECT_EQ(sse_resume_offset(body, "2"), after(body, "id: 2\n\n"));
    EXPECT_EQ(sse_resume_offset(body, "1"), body.size());
}

TEST(SseResume, TheFirstOfRepeatedIdsWins)
{
    const std::string body = "id: 9\ndata: a\n\ndata: b\n\nid: 9\ndata: c\n\n";
    EXPECT_EQ(sse_resume_offset(body, "9"), after(body, "data: a\n\n"));
}

TEST(SseResume, AnEventWithoutDataSetsTheId)
{
    const std::string body = "data: a\n\nid: 4\n\ndata: b\n\n";
    EXPECT_EQ(sse_resume_offset(body, "4"), after(body, "id: 4\n\n"));
    // with a comment but no data
    const std::string commented = "id: 4\n: nothing yet\n\ndata: b\n\n";
    EXPECT_EQ(sse_resume_offset(commented, "4"), after(commented, "nothing yet\n\n"));
}

TEST(SseResume, AnEventWithoutIdDoesNotCount)
{
    // the last event ID stays "1" through the second event, but only the
    // first set it
    const std::string body = "id: 1\n\ndata: x\n\n";
    EXPECT_EQ(sse_resume_offset(body, "1"), after(body, "id: 1\n\n"));
}

TEST(SseResume, AnEventWhoseBlankLineHasNotComeYet)
{
    EXPECT_EQ(sse_resume_offset("id: 1\ndata: a\n", "1"), 0u);
    EXPECT_EQ(sse_resume_offset("id: 1\ndata: a", "1"), 0u);
    EXPECT_EQ(sse_resume_offset("id: 1", "1"), 0u);
    EXPECT_EQ(sse_resume_offset("data: a\n\nid: 1\n", "1"), 0u);
}

TEST(SseResume, UnknownAndEmptyIds)
{
    const std::string body = "id: 1\n\nid: 2\n\n";
    EXPECT_EQ(sse_resume_offset(body, "3"), 0u);
    EXPECT_EQ(sse_resume_offset(body, ""), 0u);
    EXPECT_EQ(sse_resume_offset(body, "1 2"), 0u);
    EXPECT_EQ(sse_resume_offset("", "1"), 0u);
    EXPECT_EQ(sse_resume_offset("\n\n\n", "1"), 0u);
}

TEST(SseResume, AnIdThatIsNotUtf8MatchesItsBytesAndWhatABrowserMakesOfThem)
{
    // a browser decodes the stream as UTF-8, each bad sequence U+FFFD, and
    // sends back that id in UTF-8
    const std::string fffd = "\xEF\xBF\xBD";
    const std::string body = "id: a\xFF" "b\n\n";
    EXPECT_EQ(sse_resume_offset(body, "a\xFF" "b"), body.size());
    EXPECT_EQ(sse_resume_offset(body, "a" + fffd + "b"), body.size());
    EXPECT_EQ(sse_resume_offset(body, "ab"), 0u);
    // a truncated sequence is one U+FFFD; the byte that cut it short starts afresh
    const std::string cut = "id: \xE2\x82z\n\n";
    EXPECT_EQ(sse_resume_offset(cut, fffd + "z"), cut.size());
    EXPECT_EQ(sse_resume_offset(cut, fffd + fffd + "z"), 0u);
    // at the line's end as well
    const std::string at_end = "id: x\xF0\x9F\x98\n\n";
    EXPECT_EQ(sse_resume_offset(at_end, "x" + fffd), at_end.size());
    // an overlong or surrogate encoding is a U+FFFD per byte
    const std::string overlong = "id: \xC0\xAF\n\n";
    EXPECT_EQ(sse_resume_offset(overlong, fffd + fffd), overlong.size());
    const std::string surrogate = "id: \xED\xA0\x80\n\n";
    EXPECT_EQ(sse_resume_offset(surrogate, fffd + fffd + fffd), surrogate.size());
    // valid UTF-8 is its own bytes
    const std::string euro = "id: \xE2\x82\xAC\xF0\x9F\x98\x80\n\n";
    EXPECT_EQ(sse_resume_offset(euro, "\xE2\x82\xAC\xF0\x9F\x98\x80"), euro.size());
    EXPECT_EQ(sse_resume_offset(euro, fffd), 0u);
}

}  // namespace
