// decide.hpp — what the record found under a key means for the request
// that claims it (docs/design.md, rules). Pure: knows neither nginx nor
// Redis; each store turns what it finds into these terms (a free key that
// is now ours is Outcome::fresh without asking here).
#pragma once

#include "outcome.hpp"
#include "record.hpp"
#include "seal.hpp"

namespace idem {

// Why a value found under a key cannot be used.
// `compressed` is not a flaw but a step: the record is to be opened
// (decide_inflated) before it is decided.
enum class Unusable {
    no, not_a_record, plain, no_keys, unknown_key, altered, bad_status, bad_header_name, bad_header_value,
    newer_version, compressed, broken_frame, too_large, unknown_dictionary, damaged, pieces_too_large
};
const char* unusable_reason(Unusable why) noexcept;

// `value` is what the key holds: replayed (then `record` is the stored
// response, its views into `value`), conflict (the original is in flight),
// mismatch, unreplayable (`record` the marker), or unavailable when it is
// not a record of ours;
// unverifiable when it is a response that must not be sent again (a status
// or header no response of ours has: written to Redis by someone else). A
// compressed response of the request's fingerprint is unverifiable with
// `why` Unusable::compressed until it is opened (decide_inflated).
Outcome decide_stored(std::string_view value, const Digest& fingerprint, Record& record, Unusable& why) noexcept;

// The same with encryption at rest: with `keys`, every record but a plain
// claim (an original in flight) must be sealed and open with one of them,
// bound to `key`; what does not is `unverifiable`. A sealed record is
// opened into `out` (room for value.size()) and `value` then views it.
Outcome decide_at_rest(std::string_view key, std::string_view& value, const SecretKey* keys, std::size_t key_count,
                       const Digest& fingerprint, char* out, Record& record, Unusable& why) noexcept;

// The room a replay takes is the location's to set, never the record's: a
// body over its idempotency_max_response_size, or pieces over its
// idempotency_piece_size (piece_body_size), is unverifiable here, whatever
// kind of record holds it.
struct ReplayLimits {
    std::size_t max_body;
    std::size_t max_piece;

    // what a compressed record of such a response may open into
    std::size_t max_plain() const noexcept { return max_plain_record(max_body); }
};
// `decided` as decide_stored answered it, held to `limits`: a replayed
// `record` beyond them is unverifiable (`why` says which).
Outcome decide_limits(Outcome decided, const Record& record, const ReplayLimits& limits, Unusable& why) noexcept;

class RecordInflater;
struct Dictionaries;
// A compressed record (decide_stored's Unusable::compressed), opened into
// `out` (room for compressed_head(value)->plain_size, at most `max_plain`),
// then decided: `value` views the plain record. One that does not open,
// would open into more than `max_plain`, or was compressed with a dictionary
// not among `dictionaries` (Unusable::unknown_dictionary) is unverifiable:
// never replayed as something else, never executed again.
Outcome decide_inflated(std::string_view& value, RecordInflater& inflater, const Dictionaries& dictionaries,
                        std::size_t max_plain, char* out, const Digest& fingerprint, Record& record,
                        Unusable& why) noexcept;

}  // namespace idem
