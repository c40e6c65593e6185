// sse.hpp — where a client that reconnects with Last-Event-ID resumes a
// text/event-stream, read as an EventSource reads it (the HTML Living
// Standard's event stream parsing). Pure. See docs/design.md#event-stream-resume.
#pragma once

#include <cstddef>
#include <string_view>

namespace idem {

// Type and subtype case-insensitive; parameters and surrounding blanks ignored.
bool is_event_stream(std::string_view content_type) noexcept;

// Right after the blank line ending the first event whose `id` field set the
// last event ID to `id`; 0 (the whole stream) when no complete event did.
// Both ids are compared without surrounding blanks, as nginx trims header
// values: among ids differing only there the first wins — events may be sent
// again, never skipped. An id holding a NUL sets nothing. An id that is not
// valid UTF-8 also matches what a browser makes of it (U+FFFD per bad
// sequence), which is what it sends back. A CR as body's last byte ends its line.
std::size_t sse_resume_offset(std::string_view body, std::string_view id) noexcept;

}  // namespace idem
