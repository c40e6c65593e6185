// replayable.hpp — what a response must be to be sent again
// (docs/design.md#unreplayable): a final status (200-599: a 1xx is no final
// answer, sent as one a body after it reads as the response that follows),
// header and trailer names that are HTTP tokens, values without CR, LF or
// NUL. One rule, applied twice: by the record decoder to every stored
// response (a store anyone may write to must not split responses or
// smuggle headers through a replay), and by the capture to every response
// before it is stored, so that one that breaks it is kept as the
// unreplayable marker, saying why, rather than stored and refused at each
// replay. And what a marker's reason says: to the operator's log and
// inspection, and in the problem document of its retries' 410. Pure.
#pragma once

#include <cstddef>

#include "outcome.hpp"
#include "record.hpp"

namespace idem {

constexpr bool replayable_status(unsigned status) noexcept
{
    return status >= 200 && status <= 599;
}

// RecordFlaw::header_name or header_value for a header (or trailer) that
// cannot be sent again; RecordFlaw::none when it can.
RecordFlaw header_flaw(const Header& header) noexcept;
RecordFlaw headers_flaw(const Header* headers, std::size_t count) noexcept;
// The first flaw of a response: its status, then its headers, then its
// trailers.
RecordFlaw response_flaw(unsigned status, const Header* headers, std::size_t count,
                         const Header* trailers = nullptr, std::size_t trailer_count = 0) noexcept;

// The marker's reason for a response's flaw (MarkerWhy::unsaid for
// RecordFlaw::none and the flaws of a record that is not a response).
MarkerWhy marker_why(RecordFlaw flaw) noexcept;
// What it says, for a log line or the operator's inspection: printable
// ASCII, never a byte of the response. nullptr for MarkerWhy::unsaid and
// a reason this release does not know (a later release's marker).
const char* marker_reason(MarkerWhy why) noexcept;
// The problem document of the 410 a retry gets: the unreplayable outcome's,
// its detail naming the reason when the marker has one this release knows.
Problem unreplayable_problem(MarkerWhy why) noexcept;

}  // namespace idem
