// replayable.cpp — see replayable.hpp.
#include "replayable.hpp"

#include <cstring>

namespace idem {
namespace {

// RFC 9110's tchar.
bool is_token_char(unsigned char c) noexcept
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

}  // namespace

RecordFlaw header_flaw(const Header& header) noexcept
{
    if (header.name.empty()) {
        return RecordFlaw::header_name;
    }
    for (char c : header.name) {
        if (!is_token_char(static_cast<unsigned char>(c))) {
            return RecordFlaw::header_name;
        }
    }
    for (char c : header.value) {
        if (c == '\r' || c == '\n' || c == '\0') {
            return RecordFlaw::header_value;
        }
    }
    return RecordFlaw::none;
}

RecordFlaw headers_flaw(const Header* headers, std::size_t count) noexcept
{
    for (std::size_t i = 0; i < count; i++) {
        RecordFlaw flaw = header_flaw(headers[i]);
        if (flaw != RecordFlaw::none) {
            return flaw;
        }
    }
    return RecordFlaw::none;
}

RecordFlaw response_flaw(unsigned status, const Header* headers, std::size_t count, const Header* trailers,
                         std::size_t trailer_count) noexcept
{
    if (!replayable_status(status)) {
        return RecordFlaw::status;
    }
    RecordFlaw flaw = headers_flaw(headers, count);
    return flaw != RecordFlaw::none ? flaw : headers_flaw(trailers, trailer_count);
}

MarkerWhy marker_why(RecordFlaw flaw) noexcept
{
    switch (flaw) {
    case RecordFlaw::status: return MarkerWhy::bad_status;
    case RecordFlaw::header_name: return MarkerWhy::bad_header_name;
    case RecordFlaw::header_value: return MarkerWhy::bad_header_value;
    default: return MarkerWhy::unsaid;
    }
}

const char* marker_reason(MarkerWhy why) noexcept
{
    switch (why) {
    case MarkerWhy::bad_status: return "its status is outside 200-599 (a 1xx is no final answer)";
    case MarkerWhy::bad_header_name: return "a header or trailer name is not an HTTP token";
    case MarkerWhy::bad_header_value: return "a header or trailer value holds CR, LF or NUL";
    case MarkerWhy::unsaid: break;
    }
    return nullptr;
}

Problem unreplayable_problem(MarkerWhy why) noexcept
{
    Problem p = outcome_info(Outcome::unreplayable).problem;
    switch (why) {
    case MarkerWhy::bad_status:
        p.detail = "The request with this idempotency key was executed, but its response cannot be replayed: its "
                   "status is outside 200-599 (a 1xx is no final answer). It is not executed again.";
        break;
    case MarkerWhy::bad_header_name:
        p.detail = "The request with this idempotency key was executed, but its response cannot be replayed: a "
                   "header or trailer name is not an HTTP token. It is not executed again.";
        break;
    case MarkerWhy::bad_header_value:
        p.detail = "The request with this idempotency key was executed, but its response cannot be replayed: a "
                   "header or trailer value holds CR, LF or NUL. It is not executed again.";
        break;
    case MarkerWhy::unsaid:
        break;
    }
    return p;
}

}  // namespace idem
