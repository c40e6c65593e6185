// replayable.cpp — see replayable.hpp.
#include "replayable.hpp"

#include <array>
#include <string_view>

namespace idem {
namespace {

// What each byte may be: in a header name, RFC 9110's tchar; in a value,
// anything but CR, LF and NUL. A table: every stored response's header
// bytes pass through here, at its capture and at each replay.
enum : unsigned char { token = 1, in_value = 2 };

constexpr std::array<unsigned char, 256> byte_kinds = [] {
    std::array<unsigned char, 256> kinds{};
    for (unsigned c = 0; c < 256; c++) {
        bool tchar = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        for (char t : std::string_view{"!#$%&'*+-.^_`|~"}) {
            tchar = tchar || c == static_cast<unsigned char>(t);
        }
        kinds[c] = static_cast<unsigned char>((tchar ? token : 0) | (c != '\r' && c != '\n' && c != 0 ? in_value : 0));
    }
    return kinds;
}();

bool all_of_kind(std::string_view bytes, unsigned char kind) noexcept
{
    for (char c : bytes) {
        if ((byte_kinds[static_cast<unsigned char>(c)] & kind) == 0) {
            return false;
        }
    }
    return true;
}

}  // namespace

RecordFlaw header_flaw(const Header& header) noexcept
{
    if (header.name.empty() || !all_of_kind(header.name, token)) {
        return RecordFlaw::header_name;
    }
    return all_of_kind(header.value, in_value) ? RecordFlaw::none : RecordFlaw::header_value;
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
