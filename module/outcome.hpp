// outcome.hpp — what a request gets, decided from the reply to its claim
// (SPEC rules 4-7, 9, 10). Pure: knows nothing of nginx; reads hiredis's
// parsed reply structure only.
#pragma once

#include "record.hpp"
#include "seal.hpp"

struct redisReply;

namespace idem {

enum class Decision {
    execute,       // the claim is ours: forward upstream
    replay,        // a stored response with our fingerprint: replay it
    in_flight,     // another request with our fingerprint holds the claim
    mismatch,      // the key was used with another fingerprint: 422
    unreplayable,  // executed, response too large to keep: 410
    unavailable,   // Redis answered an error (or nothing usable): 503
    corrupt,       // the value under the key is not a record we can read
    unverifiable,  // encryption at rest: the stored record does not open (tampered, moved, unknown key)
};

// `reply` is the reply to `SET key claim NX PX ttl GET`: nil means the key
// was free and is now ours; a string is the record already there. On
// replay, `record` is filled with the decoded stored response.
Decision decide(const redisReply* reply, const Digest& fingerprint,
                Record& record) noexcept;

// The same for a record value already read (and, with encryption at rest,
// already opened): `record`'s views point into `value`.
Decision decide_stored(std::string_view value, const Digest& fingerprint, Record& record) noexcept;

// Why decide_at_rest found a record unverifiable.
enum class AtRest { ok, plain, no_keys, unknown_key, altered };
const char* at_rest_reason(AtRest why) noexcept;

// The same for a record read from a store, with encryption at rest: with
// `keys`, every record but a plain claim (an original in flight) must be
// sealed and open with one of them, bound to `key`; what does not is
// `unverifiable`, and `why` says which case it was. A sealed record is
// opened into `out` (room for value.size()) and `value` then views it.
Decision decide_at_rest(std::string_view key, std::string_view& value, const SecretKey* keys,
                        std::size_t key_count, const Digest& fingerprint, char* out, AtRest& why) noexcept;

}  // namespace idem
