// outcome.hpp — what a request gets, decided from the reply to its claim
// (SPEC rules 4-7, 9, 10). Pure: knows nothing of nginx; reads hiredis's
// parsed reply structure only.
#pragma once

#include "record.hpp"

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

}  // namespace idem
