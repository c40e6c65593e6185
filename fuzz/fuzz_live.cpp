// fuzz_live.cpp — libFuzzer target: idem::read_live on arbitrary bytes (a
// live log as the store hands it back, whole or in part), and
// idem::sse_resume_offset on them as an event stream.
//
// read_live is called until it gives bad or more, or the end item: every
// item's views lie inside the input, pos only grows, and stays put on bad
// and more; the head comes first and once, nothing follows the end. Every
// prefix of the log read so far reads as more, with exactly the items whose
// frames it holds whole — a follower that reads a growing log sees the same
// items, never bad. The frames read are rebuilt by the encoders byte for
// byte. sse_resume_offset: the first byte of the input picks where the id
// ends (the rest is the stream); the offset is at most the stream's size, 0
// or just past a line end, and the stream cut there resumes the same way.
//
//   make fuzz FUZZ_TARGETS=fuzz_live           (see the Makefile)
//   build/fuzz/fuzz_live -max_len=4096 build/fuzz/corpus/fuzz_live
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "live_log.hpp"
#include "sse.hpp"

namespace {

using idem::LiveItem;
using idem::LiveReadState;
using idem::LiveStep;

bool inside(std::string_view part, std::string_view whole)
{
    if (part.empty()) {
        return true;  // an empty view may point anywhere; it is never read
    }
    return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Touches every byte of a view, so that ASan checks each read.
unsigned sum(std::string_view bytes)
{
    unsigned s = 0;
    for (char c : bytes) {
        s += static_cast<unsigned char>(c);
    }
    return s;
}

struct Read {
    std::vector<LiveItem> items;
    std::vector<std::size_t> ends;  // pos after each item
    LiveStep last = LiveStep::more;
};

Read read_all(std::string_view log)
{
    Read r;
    LiveReadState state;
    std::size_t pos = 0;
    for (;;) {
        LiveItem item;
        const std::size_t before = pos;
        const LiveReadState was = state;
        r.last = idem::read_live(log, pos, state, item);
        if (r.last != LiveStep::item) {
            FUZZ_CHECK(pos == before);
            FUZZ_CHECK(state.head_seen == was.head_seen && state.ended == was.ended);
            return r;
        }
        FUZZ_CHECK(pos > before && pos <= log.size());
        FUZZ_CHECK(!was.ended);
        FUZZ_CHECK(state.head_seen);
        FUZZ_CHECK((item.kind == LiveItem::Kind::head) == !was.head_seen);
        FUZZ_CHECK(state.ended == (item.kind == LiveItem::Kind::end));
        const std::string_view frame = log.substr(before, pos - before);
        switch (item.kind) {
        case LiveItem::Kind::head: {
            const idem::Record& h = item.head;
            FUZZ_CHECK(h.kind == idem::RecordKind::response && h.body.empty());
            FUZZ_CHECK(inside(h.headers, frame) && inside(h.trailers, frame) && inside(h.token, frame));
            (void)(sum(h.headers) + sum(h.trailers));
            break;
        }
        case LiveItem::Kind::body:
            FUZZ_CHECK(!item.body.empty() && inside(item.body, frame));
            FUZZ_CHECK(item.body.data() + item.body.size() == log.data() + pos);
            (void)sum(item.body);
            break;
        case LiveItem::Kind::end:
            FUZZ_CHECK(item.how == idem::LiveEnd::complete || item.how == idem::LiveEnd::aborted
                       || item.how == idem::LiveEnd::cut);
            break;
        default:
            FUZZ_CHECK(!"read_live gave an unknown kind");
        }
        r.items.push_back(item);
        r.ends.push_back(pos);
        if (item.kind == LiveItem::Kind::end) {
            LiveItem after;
            r.last = idem::read_live(log, pos, state, after);
            FUZZ_CHECK(r.last == (pos == log.size() ? LiveStep::more : LiveStep::bad));
            return r;
        }
    }
}

// The frames read, written again by the encoders.
void check_rebuilt(std::string_view log, const Read& r)
{
    std::vector<char> out(idem::live_start_size);
    FUZZ_CHECK(idem::encode_live_start(out.data()) == idem::live_start_size);
    for (const LiveItem& item : r.items) {
        const std::size_t at = out.size();
        switch (item.kind) {
        case LiveItem::Kind::head: {
            std::vector<idem::Header> headers;
            std::vector<idem::Header> trailers;
            idem::Header h;
            for (idem::HeaderReader hr(item.head); hr.next(h);) {
                headers.push_back(h);
            }
            for (idem::HeaderReader tr = idem::HeaderReader::trailers(item.head); tr.next(h);) {
                trailers.push_back(h);
            }
            const idem::ResponseExtras extras{item.head.flags, trailers.data(), trailers.size()};
            const std::size_t size = idem::live_head_size(headers.data(), headers.size(), extras);
            FUZZ_CHECK(size != 0);
            out.resize(at + size);
            FUZZ_CHECK(idem::encode_live_head(out.data() + at, item.head.fingerprint, item.head.status,
                                              headers.data(), headers.size(), extras)
                       == size);
            break;
        }
        case LiveItem::Kind::body: {
            out.resize(at + idem::live_frame_overhead + item.body.size());
            char* body = idem::encode_live_body_header(out.data() + at, item.body.size());
            FUZZ_CHECK(body == out.data() + at + idem::live_frame_overhead);
            std::memcpy(body, item.body.data(), item.body.size());
            break;
        }
        case LiveItem::Kind::end:
            out.resize(at + idem::live_end_size);
            FUZZ_CHECK(idem::encode_live_end(out.data() + at, item.how) == idem::live_end_size);
            break;
        }
    }
    const std::size_t read = r.ends.empty() ? 0 : r.ends.back();
    FUZZ_CHECK(out.size() == (r.items.empty() ? idem::live_start_size : read));
    FUZZ_CHECK(std::memcmp(out.data(), log.data(), r.items.empty() ? 0 : read) == 0);
}

void check_live(std::string_view log)
{
    const Read whole = read_all(log);
    check_rebuilt(log, whole);
    // what a follower sees of the log as it grows: every prefix up to where
    // the reading stopped is more, with the items it holds whole (the
    // prefixes checked are bounded to keep the run fast)
    const std::size_t stop = whole.ends.empty() ? (whole.last == LiveStep::bad ? 0 : log.size())
                                                : whole.ends.back();
    const std::size_t step = stop / 64 + 1;
    for (std::size_t n = 0; n < stop; n += step) {
        const Read part = read_all(log.substr(0, n));
        FUZZ_CHECK(part.last == LiveStep::more);
        std::size_t complete = 0;
        while (complete < whole.ends.size() && whole.ends[complete] <= n) {
            ++complete;
        }
        FUZZ_CHECK(part.items.size() == complete);
        for (std::size_t i = 0; i < complete; ++i) {
            FUZZ_CHECK(part.items[i].kind == whole.items[i].kind);
            FUZZ_CHECK(part.items[i].body == whole.items[i].body);
        }
    }
}

bool after_line_end(std::string_view body, std::size_t offset)
{
    return offset == 0 || body[offset - 1] == '\n' || body[offset - 1] == '\r';
}

void check_sse(std::string_view bytes)
{
    if (bytes.empty()) {
        return;
    }
    const std::size_t id_size = static_cast<unsigned char>(bytes[0]) % 16;
    const std::string_view rest = bytes.substr(1);
    const std::string_view id = rest.substr(0, id_size);
    const std::string_view body = rest.substr(id.size());
    const std::size_t offset = idem::sse_resume_offset(body, id);
    FUZZ_CHECK(offset <= body.size());
    FUZZ_CHECK(after_line_end(body, offset));
    FUZZ_CHECK(id.empty() ? offset == 0 : true);
    // the stream as far as the offset already holds the event that set the id
    FUZZ_CHECK(idem::sse_resume_offset(body.substr(0, offset), id) == offset);
    (void)idem::is_event_stream(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    // libFuzzer's buffer is a heap block of exactly `size` bytes: ASan
    // reports any read past it.
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_live(bytes);
    check_sse(bytes);
    return 0;
}
