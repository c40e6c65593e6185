// live_log.hpp — the codec of a response's live log: what an original
// request publishes in the store while its response streams out, so that a
// duplicate in another process can follow it byte by byte (join it live). An
// append-only byte string: a start, then the response's head, its body in
// as many pieces as it came in, and how it ended. Pure: knows nothing of
// nginx or Redis; where the log lives and who appends to it is the stores'.
//
// Layout (integers big-endian):
//   live log := "IDL" version(1)=1  frame*
//   frame    := type(1) length(4) payload(length)
//     'H' head: a response record (record.hpp) with an empty body —
//               fingerprint, status, flags, headers, trailers. Exactly one,
//               the first frame.
//     'B' body: body bytes (length >= 1).
//     'E' end:  one byte, how the response ended (LiveEnd). The last frame.
// A frame's length is at most live_max_frame_length.
//
// A follower reads a prefix of the log: read_live tells a log that stops
// mid-frame (read again once it grew) from one that is not a live log or
// whose frames are out of order. Every view it hands out points into the log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "record.hpp"

namespace idem {

enum class LiveEnd : std::uint8_t {
    complete = 1,  // all of it was sent
    aborted = 2,   // the upstream died mid-response, or the original's capture failed
    cut = 3,       // the response outgrew idempotency_max_response_size
};

constexpr std::uint8_t live_version = 1;
constexpr std::size_t live_start_size = 4;      // "IDL" version
constexpr std::size_t live_frame_overhead = 5;  // type + length
constexpr std::size_t live_end_size = live_frame_overhead + 1;
// The longest payload a frame may have (2 GiB); a longer length is not a
// live log's.
constexpr std::size_t live_max_frame_length = std::size_t{1} << 31;

std::size_t encode_live_start(char* out) noexcept;

// Size of the head frame (overhead included) for this response; 0 when it
// cannot be written (as response_size gives 0, or its payload would be over
// live_max_frame_length).
std::size_t live_head_size(const Header* headers, std::size_t count,
                           const ResponseExtras& extras = {}) noexcept;
// Writes the head frame (room for live_head_size); returns its size (0,
// writing nothing, when live_head_size would be 0).
std::size_t encode_live_head(char* out, const Digest& fingerprint, std::uint16_t status,
                             const Header* headers, std::size_t count,
                             const ResponseExtras& extras = {}) noexcept;

// Writes a body frame's type and length (live_frame_overhead bytes); the
// caller copies `length` body bytes right after; returns where they go.
// `length` is 1 to live_max_frame_length: for any other, nullptr, writing
// nothing.
char* encode_live_body_header(char* out, std::size_t length) noexcept;

std::size_t encode_live_end(char* out, LiveEnd how) noexcept;

enum class LiveStep : std::uint8_t {
    item,  // an item read
    more,  // the log ends mid-frame (or is empty, or short): read again once it grew
    bad,   // not a live log, or its frames out of order
};

struct LiveItem {
    enum class Kind : std::uint8_t { head, body, end } kind = Kind::head;
    Record head{};            // head: decoded by decode_record; views into the log
    std::string_view body;    // body: views into the log
    LiveEnd how = LiveEnd::complete;  // end
};

struct LiveReadState {
    bool head_seen = false;
    bool ended = false;
};

// Reads the item at `pos` of `log` (pos 0: checks the start first, then
// reads the frame after it); advances `pos` past it on `item`, leaves it,
// and `state`, as they were on `more` and `bad`. Bad: a wrong start, a frame
// type or end byte it does not know, a length over live_max_frame_length, a
// body frame of length 0, an end frame whose length is not 1, a head whose
// payload decode_record refuses or that is not a response with an empty
// body, a frame before the head or a second head, anything after the end.
// After the end item the log is whole: reading on gives `more` while
// nothing follows, `bad` once something does.
LiveStep read_live(std::string_view log, std::size_t& pos, LiveReadState& state,
                   LiveItem& out) noexcept;

}  // namespace idem
