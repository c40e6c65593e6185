// test_live_log.cpp — the live log codec: exact frame bytes, round trips
// read back item by item, every prefix of a valid log read as "more" at the
// right place, and every way a log can be bad.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "live_log.hpp"

namespace {

using idem::Header;
using idem::LiveEnd;
using idem::LiveItem;
using idem::LiveReadState;
using idem::LiveStep;

idem::Digest digest_of(std::uint8_t first)
{
    idem::Digest digest;
    for (std::size_t i = 0; i < digest.size(); ++i) {
        digest[i] = static_cast<std::uint8_t>(first + i);
    }
    return digest;
}

std::string start()
{
    std::string out(idem::live_start_size, '?');
    EXPECT_EQ(idem::encode_live_start(out.data()), idem::live_start_size);
    return out;
}

std::string head(const idem::Digest& fp, std::uint16_t status, const std::vector<Header>& headers,
                 const idem::ResponseExtras& extras = {})
{
    const std::size_t size = idem::live_head_size(headers.data(), headers.size(), extras);
    EXPECT_NE(size, 0u);
    std::string out(size, '?');
    EXPECT_EQ(idem::encode_live_head(out.data(), fp, status, headers.data(), headers.size(), extras), size);
    return out;
}

std::string body(std::string_view bytes)
{
    std::string out(idem::live_frame_overhead + bytes.size(), '?');
    char* at = idem::encode_live_body_header(out.data(), bytes.size());
    EXPECT_EQ(at, out.data() + idem::live_frame_overhead);
    if (at != nullptr) {
        bytes.copy(at, bytes.size());
    }
    return out;
}

std::string end(LiveEnd how)
{
    std::string out(idem::live_end_size, '?');
    EXPECT_EQ(idem::encode_live_end(out.data(), how), idem::live_end_size);
    return out;
}

std::string frame(char type, std::string_view payload)
{
    const std::size_t n = payload.size();
    std::string out(1, type);
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((n >> shift) & 0xff));
    }
    return out.append(payload);
}

const std::vector<Header> typical = {
    {"Content-Type", "text/event-stream"},
    {"Cache-Control", "no-cache"},
    {"Set-Cookie", "a=1"},
    {"Set-Cookie", "b=2"},
};

std::string valid_log()
{
    return start() + head(digest_of(7), 200, typical) + body("data: 1\n\n") + body("data: 2\n\n")
           + body(std::string("\0\xff\r\n", 4)) + end(LiveEnd::complete);
}

// Reads every item of `log` from the start: the items and what the last read gave.
struct ReadAll {
    std::vector<LiveItem> items;
    std::vector<std::size_t> ends;  // pos after each item
    LiveStep last = LiveStep::item;
    std::size_t pos = 0;
};

ReadAll read_all(std::string_view log)
{
    ReadAll r;
    LiveReadState state;
    for (int guard = 0; guard < 1000; ++guard) {
        LiveItem item;
        const std::size_t before = r.pos;
        r.last = idem::read_live(log, r.pos, state, item);
        if (r.last != LiveStep::item) {
            EXPECT_EQ(r.pos, before) << "pos moved without an item";
            return r;
        }
        EXPECT_GT(r.pos, before);
        r.items.push_back(item);
        r.ends.push_back(r.pos);
        if (item.kind == LiveItem::Kind::end) {
            // whole: nothing more to read, and nothing may follow
            LiveItem after;
            const std::size_t at = r.pos;
            r.last = idem::read_live(log, r.pos, state, after);
            EXPECT_EQ(r.pos, at);
            return r;
        }
    }
    ADD_FAILURE() << "no end in 1000 reads";
    return r;
}

std::vector<Header> headers_of(const idem::Record& record)
{
    std::vector<Header> out;
    idem::HeaderReader reader(record);
    Header h;
    while (reader.next(h)) {
        out.push_back(h);
    }
    return out;
}

bool same(const Header& a, const Header& b)
{
    return a.name == b.name && a.value == b.value;
}

bool same(const std::vector<Header>& a, const std::vector<Header>& b)
{
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!same(a[i], b[i])) {
            return false;
        }
    }
    return true;
}

TEST(LiveLogLayout, StartBodyAndEndBytes)
{
    EXPECT_EQ(start(), std::string("IDL\x01", 4));
    EXPECT_EQ(body("abc"), std::string("B\0\0\0\x03" "abc", 8));
    EXPECT_EQ(end(LiveEnd::complete), std::string("E\0\0\0\x01\x01", 6));
    EXPECT_EQ(end(LiveEnd::aborted), std::string("E\0\0\0\x01\x02", 6));
    EXPECT_EQ(end(LiveEnd::cut), std::string("E\0\0\0\x01\x03", 6));
    std::string big(idem::live_frame_overhead, '?');
    ASSERT_NE(idem::encode_live_body_header(big.data(), 0x01020304), nullptr);
    EXPECT_EQ(big, std::string("B\x01\x02\x03\x04", 5));
}

TEST(LiveLogLayout, HeadIsAResponseRecordWithAnEmptyBody)
{
    const idem::Digest fp = digest_of(1);
    const std::string h = head(fp, 201, typical);
    const std::size_t record_size = idem::response_size(typical.data(), typical.size(), 0);
    ASSERT_EQ(h.size(), idem::live_frame_overhead + record_size);
    EXPECT_EQ(h[0], 'H');
    EXPECT_EQ(h.substr(1, 4), std::string("\0\0", 2) + static_cast<char>(record_size >> 8)
                                  + static_cast<char>(record_size & 0xff));
    std::string record(record_size, '?');
    char* at = idem::encode_response_head(record.data(), fp, 201, typical.data(), typical.size(), 0);
    ASSERT_EQ(at, record.data() + record.size());
    EXPECT_EQ(h.substr(idem::live_frame_overhead), record);
}

TEST(LiveLogLayout, HeadWithExtrasCarriesFlagsAndTrailers)
{
    const std::vector<Header> trailers = {{"grpc-status", "0"}, {"grpc-message", "ok"}};
    const idem::ResponseExtras extras{idem::expect_trailers | idem::allow_ranges, trailers.data(), trailers.size()};
    const std::string h = head(digest_of(3), 200, {{"Content-Type", "application/grpc"}}, extras);
    const std::vector<Header> one = {{"Content-Type", "application/grpc"}};
    EXPECT_EQ(h.size(), idem::live_frame_overhead + idem::response_size(one.data(), one.size(), 0, extras));

    const std::string log = start() + h + end(LiveEnd::complete);
    const ReadAll r = read_all(log);
    ASSERT_EQ(r.items.size(), 2u);
    const idem::Record& rec = r.items[0].head;
    EXPECT_EQ(rec.flags, idem::expect_trailers | idem::allow_ranges);
    ASSERT_EQ(rec.trailer_count, 2u);
    idem::HeaderReader tr = idem::HeaderReader::trailers(rec);
    Header t;
    ASSERT_TRUE(tr.next(t));
    EXPECT_TRUE(same(t, trailers[0]));
    ASSERT_TRUE(tr.next(t));
    EXPECT_TRUE(same(t, trailers[1]));
}

TEST(LiveLogLayout, SizesThatCannotBeWritten)
{
    // a header name over 65535 bytes: no response record, no head
    const std::string long_name(70000, 'n');
    const std::vector<Header> bad = {{long_name, "v"}};
    EXPECT_EQ(idem::live_head_size(bad.data(), bad.size()), 0u);
    std::string out(8, '?');
    EXPECT_EQ(idem::encode_live_head(out.data(), digest_of(0), 200, bad.data(), bad.size()), 0u);
    EXPECT_EQ(out, std::string(8, '?'));  // nothing written

    EXPECT_EQ(idem::encode_live_body_header(out.data(), 0), nullptr);
    EXPECT_EQ(idem::encode_live_body_header(out.data(), idem::live_max_frame_length + 1), nullptr);
    EXPECT_EQ(out, std::string(8, '?'));
    EXPECT_NE(idem::encode_live_body_header(out.data(), idem::live_max_frame_length), nullptr);
    EXPECT_EQ(out.substr(0, 5), std::string("B\x80\0\0\0", 5));
}

TEST(LiveLogRead, RoundTripItemByItem)
{
    const idem::Digest fp = digest_of(7);
    const std::string log = valid_log();
    const ReadAll r = read_all(log);
    EXPECT_EQ(r.last, LiveStep::more);  // whole, nothing follows
    ASSERT_EQ(r.items.size(), 5u);

    ASSERT_EQ(r.items[0].kind, LiveItem::Kind::head);
    const idem::Record& rec = r.items[0].head;
    EXPECT_EQ(rec.kind, idem::RecordKind::response);
    EXPECT_EQ(rec.fingerprint, fp);
    EXPECT_EQ(rec.status, 200);
    EXPECT_EQ(rec.flags, 0);
    EXPECT_TRUE(rec.body.empty());
    EXPECT_TRUE(same(headers_of(rec), typical));

    ASSERT_EQ(r.items[1].kind, LiveItem::Kind::body);
    EXPECT_EQ(r.items[1].body, "data: 1\n\n");
    ASSERT_EQ(r.items[2].kind, LiveItem::Kind::body);
    EXPECT_EQ(r.items[2].body, "data: 2\n\n");
    ASSERT_EQ(r.items[3].kind, LiveItem::Kind::body);
    EXPECT_EQ(r.items[3].body, std::string("\0\xff\r\n", 4));
    ASSERT_EQ(r.items[4].kind, LiveItem::Kind::end);
    EXPECT_EQ(r.items[4].how, LiveEnd::complete);
    EXPECT_EQ(r.ends.back(), log.size());

    // views into the log itself
    for (const LiveItem& item : r.items) {
        if (item.kind == LiveItem::Kind::body) {
            EXPECT_GE(item.body.data(), log.data());
            EXPECT_LE(item.body.data() + item.body.size(), log.data() + log.size());
        }
    }
    EXPECT_GE(rec.headers.data(), log.data());
    EXPECT_LE(rec.headers.data() + rec.headers.size(), log.data() + log.size());
}

TEST(LiveLogRead, EveryEndReadsBack)
{
    for (LiveEnd how : {LiveEnd::complete, LiveEnd::aborted, LiveEnd::cut}) {
        const ReadAll r = read_all(start() + head(digest_of(0), 204, {}) + end(how));
        ASSERT_EQ(r.items.size(), 2u);
        EXPECT_EQ(r.items[1].kind, LiveItem::Kind::end);
        EXPECT_EQ(r.items[1].how, how);
        EXPECT_EQ(r.items[0].head.status, 204);
        EXPECT_EQ(r.items[0].head.header_count, 0);
    }
}

TEST(LiveLogRead, EveryPrefixReadsAsMoreAtTheRightPlace)
{
    const std::string log = valid_log();
    const ReadAll whole = read_all(log);
    ASSERT_EQ(whole.items.size(), 5u);
    for (std::size_t n = 0; n <= log.size(); ++n) {
        SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
        const ReadAll r = read_all(std::string_view(log).substr(0, n));
        ASSERT_EQ(r.last, LiveStep::more);
        // exactly the items whose frames lie wholly inside the prefix
        std::size_t complete = 0;
        while (complete < whole.ends.size() && whole.ends[complete] <= n) {
            ++complete;
        }
        ASSERT_EQ(r.items.size(), complete);
        EXPECT_EQ(r.pos, complete == 0 ? 0 : whole.ends[complete - 1]);
        for (std::size_t i = 0; i < complete; ++i) {
            EXPECT_EQ(r.items[i].kind, whole.items[i].kind);
            EXPECT_EQ(r.items[i].body, whole.items[i].body);
        }
    }
}

TEST(LiveLogRead, AGrowingLogIsReadOnWhereTheLastReadStopped)
{
    // a follower reads the prefix it has, then again from where it stopped
    const std::string log = valid_log();
    LiveReadState state;
    std::size_t pos = 0;
    std::vector<LiveItem> items;
    for (std::size_t n = 0; n <= log.size(); ++n) {
        for (;;) {
            LiveItem item;
            const LiveStep step = idem::read_live(std::string_view(log).substr(0, n), pos, state, item);
            ASSERT_NE(step, LiveStep::bad) << "at " << n;
            if (step == LiveStep::more) {
                break;
            }
            items.push_back(item);
        }
    }
    ASSERT_EQ(items.size(), 5u);
    EXPECT_EQ(items[3].body, std::string("\0\xff\r\n", 4));
    EXPECT_TRUE(state.ended);
    EXPECT_EQ(pos, log.size());
}

LiveStep first_bad_or_more(std::string_view log)
{
    return read_all(log).last;
}

TEST(LiveLogRead, BadStart)
{
    const std::string rest = head(digest_of(0), 200, {}) + end(LiveEnd::complete);
    EXPECT_EQ(first_bad_or_more("IDM\x01" + rest), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(std::string("IDL\x02", 4) + rest), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(std::string("IDL\x00", 4) + rest), LiveStep::bad);
    // a short log that already is not a live log's start
    EXPECT_EQ(first_bad_or_more("X"), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more("IDX"), LiveStep::bad);
    // a record is not a live log
    std::string record(idem::response_size(nullptr, 0, 2), '?');
    std::memcpy(idem::encode_response_head(record.data(), digest_of(0), 200, nullptr, 0, 2), "ok", 2);
    EXPECT_EQ(first_bad_or_more(record), LiveStep::bad);
}

TEST(LiveLogRead, BadOrder)
{
    const std::string h = head(digest_of(0), 200, typical);
    // no head first
    EXPECT_EQ(first_bad_or_more(start() + body("x")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + end(LiveEnd::complete)), LiveStep::bad);
    // a second head
    EXPECT_EQ(first_bad_or_more(start() + h + h), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + h + body("x") + h), LiveStep::bad);
    // anything after the end, even one byte of a frame
    EXPECT_EQ(first_bad_or_more(start() + h + end(LiveEnd::aborted) + body("x")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + h + end(LiveEnd::aborted) + "B"), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + h + end(LiveEnd::aborted) + end(LiveEnd::complete)), LiveStep::bad);
    // judged as soon as the type byte is there
    EXPECT_EQ(first_bad_or_more(start() + "B"), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + h + "H"), LiveStep::bad);
}

TEST(LiveLogRead, BadFrames)
{
    const std::string s = start() + head(digest_of(0), 200, typical);
    // an unknown type
    EXPECT_EQ(first_bad_or_more(s + frame('X', "abc")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + "b"), LiveStep::bad);
    // a body frame of length 0
    EXPECT_EQ(first_bad_or_more(s + frame('B', "")), LiveStep::bad);
    // an end frame whose length is not 1, or whose byte is unknown
    EXPECT_EQ(first_bad_or_more(s + frame('E', "")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + frame('E', "\x01\x01")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + frame('E', std::string(1, '\0'))), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + frame('E', "\x04")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + frame('E', "\xff")), LiveStep::bad);
    // a length over 2^31, judged before the payload arrives
    EXPECT_EQ(first_bad_or_more(s + std::string("B\x80\0\0\x01", 5)), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(s + std::string("B\xff\xff\xff\xff", 5)), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + std::string("H\x80\0\0\x01", 5)), LiveStep::bad);
    // 2^31 itself is a length a frame may have: more, not bad
    EXPECT_EQ(first_bad_or_more(s + std::string("B\x80\0\0\0", 5)), LiveStep::more);
}

TEST(LiveLogRead, BadHeads)
{
    const idem::Digest fp = digest_of(0);
    // not a record
    EXPECT_EQ(first_bad_or_more(start() + frame('H', "hello")), LiveStep::bad);
    // a record of another kind
    std::string claim(idem::claim_size("tok"), '?');
    idem::encode_claim(fp, "tok", claim.data());
    EXPECT_EQ(first_bad_or_more(start() + frame('H', claim)), LiveStep::bad);
    std::string unreplayable(idem::unreplayable_size, '?');
    idem::encode_unreplayable(fp, 200, unreplayable.data());
    EXPECT_EQ(first_bad_or_more(start() + frame('H', unreplayable)), LiveStep::bad);
    // a response with a body
    std::string full(idem::response_size(nullptr, 0, 2), '?');
    std::memcpy(idem::encode_response_head(full.data(), fp, 200, nullptr, 0, 2), "ok", 2);
    EXPECT_EQ(first_bad_or_more(start() + frame('H', full)), LiveStep::bad);
    // a response decode_record refuses: a status no response has, a header
    // value that would split the response
    std::string status99(idem::live_head_size(nullptr, 0), '?');
    ASSERT_EQ(idem::encode_live_head(status99.data(), fp, 99, nullptr, 0), status99.size());
    EXPECT_EQ(first_bad_or_more(start() + status99), LiveStep::bad);
    const std::vector<Header> split = {{"X", "a\r\nSet-Cookie: b"}};
    std::string h(idem::live_head_size(split.data(), split.size()), '?');
    ASSERT_EQ(idem::encode_live_head(h.data(), fp, 200, split.data(), split.size()), h.size());
    EXPECT_EQ(first_bad_or_more(start() + h), LiveStep::bad);
    // a head frame longer or shorter than its record
    const std::string good = head(fp, 200, typical);
    const std::string record = good.substr(idem::live_frame_overhead);
    EXPECT_EQ(first_bad_or_more(start() + frame('H', record + "x")), LiveStep::bad);
    EXPECT_EQ(first_bad_or_more(start() + frame('H', record.substr(0, record.size() - 1))), LiveStep::bad);
}

TEST(LiveLogRead, PosAndStateStayPutOnBadAndMore)
{
    const std::string log = start() + head(digest_of(0), 200, {}) + frame('B', "");
    LiveReadState state;
    std::size_t pos = 0;
    LiveItem item;
    ASSERT_EQ(idem::read_live(log, pos, state, item), LiveStep::item);
    const std::size_t at = pos;
    EXPECT_EQ(idem::read_live(log, pos, state, item), LiveStep::bad);
    EXPECT_EQ(pos, at);
    EXPECT_TRUE(state.head_seen);
    EXPECT_FALSE(state.ended);
    EXPECT_EQ(idem::read_live(std::string_view(log).substr(0, at + 2), pos, state, item), LiveStep::more);
    EXPECT_EQ(pos, at);
}

TEST(LiveLogRead, PositionsThatAreNoFrame)
{
    const std::string log = valid_log();
    LiveReadState state;
    LiveItem item;
    std::size_t pos = 2;  // inside the start
    EXPECT_EQ(idem::read_live(log, pos, state, item), LiveStep::bad);
    pos = log.size() + 1;  // past the end
    EXPECT_EQ(idem::read_live(log, pos, state, item), LiveStep::bad);
    // back to 0 with a state that has read the head already
    state.head_seen = true;
    pos = 0;
    EXPECT_EQ(idem::read_live(log, pos, state, item), LiveStep::bad);
}

}  // namespace
