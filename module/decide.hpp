// decide.hpp — what the record found under a key means for the request that
// claims it. Pure; each store turns what it finds into these terms.
// See docs/design.md#rules-what-a-request-gets.
#pragma once

#include "outcome.hpp"
#include "record.hpp"
#include "seal.hpp"

namespace idem {

// `compressed` is not a flaw but a step: open it (decide_inflated) first.
enum class Unusable {
    no, not_a_record, plain, no_keys, unknown_key, altered, bad_status, bad_header_name, bad_header_value,
    newer_version, compressed, broken_frame, too_large, unknown_dictionary, damaged, pieces_too_large
};
const char* unusable_reason(Unusable why) noexcept;

// `record` views `value` (the response, or the marker). Unavailable when not
// a record of ours; unverifiable when a response must not be sent again (a
// status or header no response of ours has: written by someone else), or,
// with Unusable::compressed, a compressed one until opened.
Outcome decide_stored(std::string_view value, const Digest& fingerprint, Record& record, Unusable& why) noexcept;

// With `keys`, every record but a plain claim must be sealed and open with
// one of them, bound to `key`; else unverifiable. A sealed record is opened
// into `out` (room for value.size()) and `value` then views it.
Outcome decide_at_rest(std::string_view key, std::string_view& value, const SecretKey* keys, std::size_t key_count,
                       const Digest& fingerprint, char* out, Record& record, Unusable& why) noexcept;

// The room a replay takes is the location's to set, never the record's:
// beyond these, any kind of record is unverifiable.
struct ReplayLimits {
    std::size_t max_body;
    std::size_t max_piece;

    std::size_t max_plain() const noexcept { return max_plain_record(max_body); }
};
// A replayed `record` beyond `limits` is unverifiable (`why` says which).
Outcome decide_limits(Outcome decided, const Record& record, const ReplayLimits& limits, Unusable& why) noexcept;

class RecordInflater;
struct Dictionaries;
// `out` has room for plain_size, at most `max_plain`; `value` then views the
// plain record. One that does not open, would exceed `max_plain` or needs a
// dictionary not in `dictionaries` is unverifiable: never replayed as
// something else, never executed again.
Outcome decide_inflated(std::string_view& value, RecordInflater& inflater, const Dictionaries& dictionaries,
                        std::size_t max_plain, char* out, const Digest& fingerprint, Record& record,
                        Unusable& why) noexcept;

}  // namespace idem
