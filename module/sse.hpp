// sse.hpp — resuming a server-sent event stream (text/event-stream): where
// a client that reconnects with Last-Event-ID picks the stream up again. The
// stream is read as an EventSource reads it (the HTML Living Standard's
// event stream parsing); only what sets the last event ID matters here.
// Pure: knows nothing of nginx; which responses are resumed, and what is
// sent from the offset on, is the request side's.
#pragma once

#include <cstddef>
#include <string_view>

namespace idem {

// Whether a Content-Type value names text/event-stream: type and subtype
// case-insensitive, parameters (after ';') and surrounding spaces and tabs
// ignored.
bool is_event_stream(std::string_view content_type) noexcept;

// Where a client that reconnects with Last-Event-ID `id` resumes in `body`
// (the stream's bytes as the client got them): right after the blank line
// that ends the first event whose `id` field set the last event ID to
// `id`; 0 — the whole stream — when no complete event did (an unknown id,
// an empty one, or an event whose blank line has not come yet). HTTP does
// not carry the spaces and tabs around a header's value (nginx trims
// them): both ids are compared without them, so that among ids differing
// only there the first wins — events may be sent again, never skipped.
//
// The stream: an optional UTF-8 BOM first; lines end with CRLF, LF or CR (a
// CR that is the last byte of `body` ends its line); an event is the lines
// up to a blank line. A line starting with ':' is a comment; "name:value"
// loses one space at the start of the value; a line without ':' is a name
// with an empty value. An `id` line sets the last event ID, even in an
// event without data, unless its value holds a NUL; the last `id` line of
// an event is the one that counts. An id that is not valid UTF-8 matches
// both its bytes and what a browser makes of them (each bad sequence
// U+FFFD), which is what it sends back.
std::size_t sse_resume_offset(std::string_view body, std::string_view id) noexcept;

}  // namespace idem
