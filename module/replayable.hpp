// replayable.hpp — what a response must be to be sent again: a final status
// (a 1xx sent as final makes its body read as the next response), token
// header names, values without CR, LF or NUL. Applied by the decoder to every
// stored response (a store anyone may write to must not split responses or
// smuggle headers) and by the capture before storing, so a response that
// breaks it becomes the marker saying why. Pure.
// See docs/design.md#unreplayable.
#pragma once

#include <cstddef>

#include "outcome.hpp"
#include "record.hpp"

namespace idem {

constexpr bool replayable_status(unsigned status) noexcept
{
    return status >= 200 && status <= 599;
}

// RecordFlaw::none when it can be sent again.
RecordFlaw header_flaw(const Header& header) noexcept;
RecordFlaw headers_flaw(const Header* headers, std::size_t count) noexcept;
// Status first, then headers, then trailers.
RecordFlaw response_flaw(unsigned status, const Header* headers, std::size_t count,
                         const Header* trailers = nullptr, std::size_t trailer_count = 0) noexcept;

// MarkerWhy::unsaid for none and for flaws of a record that is not a response.
MarkerWhy marker_why(RecordFlaw flaw) noexcept;
// Printable ASCII, never a byte of the response. nullptr for unsaid and for
// a later release's reason.
const char* marker_reason(MarkerWhy why) noexcept;
// Its detail names the reason when this release knows it.
Problem unreplayable_problem(MarkerWhy why) noexcept;

}  // namespace idem
