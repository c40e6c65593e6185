// live_log.hpp — the codec of a response's live log, which an original
// publishes while it streams so a duplicate elsewhere can join it live.
// Pure: where it lives and who appends is the stores'.
// See docs/design.md#live-join. Layout (stored data, big-endian):
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
// read_live tells a log that stops mid-frame (read again once it grew) from
// one that is bad. Every view it hands out points into the log.
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
// 2 GiB; a longer length is not a live log's.
constexpr std::size_t live_max_frame_length = std::size_t{1} << 31;

std::size_t encode_live_start(char* out) noexcept;

// Overhead included; 0 when it cannot be written (as response_size, or a
// payload over live_max_frame_length).
std::size_t live_head_size(const Header* headers, std::size_t count,
                           const ResponseExtras& extras = {}) noexcept;
// 0, writing nothing, when live_head_size would be 0.
std::size_t encode_live_head(char* out, const Digest& fingerprint, std::uint16_t status,
                             const Header* headers, std::size_t count,
                             const ResponseExtras& extras = {}) noexcept;

// Returns where the caller copies `length` body bytes; nullptr, writing
// nothing, unless `length` is 1 to live_max_frame_length.
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

// pos 0 checks the start first. Advances `pos` on `item`; leaves it and
// `state` on `more` and `bad`. Bad: a wrong start, unknown type or end
// byte, a length over the max, an empty body frame, an end frame not of
// length 1, a head decode_record refuses or that is not a response with an
// empty body, a frame before the head, a second head, anything after the end.
LiveStep read_live(std::string_view log, std::size_t& pos, LiveReadState& state,
                   LiveItem& out) noexcept;

}  // namespace idem
