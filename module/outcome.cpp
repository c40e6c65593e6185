// outcome.cpp — maps the reply to the claiming SET onto what the request
// gets (SPEC rules 4-7, 9, 10).
#include "outcome.hpp"

#include <hiredis/hiredis.h>

namespace idem {

Decision decide(const redisReply* reply, const Digest& fingerprint,
                Record& record) noexcept
{
    if (reply == nullptr) {
        return Decision::unavailable;
    }
    switch (reply->type) {
    case REDIS_REPLY_NIL:
        return Decision::execute;
    case REDIS_REPLY_STRING:
        break;
    default:
        // Errors and any reply SET ... GET cannot give: never guess.
        return Decision::unavailable;
    }

    return decide_stored(std::string_view(reply->str, reply->len), fingerprint, record);
}

Decision decide_stored(std::string_view value, const Digest& fingerprint, Record& record) noexcept
{
    const std::optional<Record> stored = decode_record(value);
    if (!stored) {
        return Decision::corrupt;
    }
    // The fingerprint check comes first for every kind: a key reused for a
    // different request is a client error whatever state the key is in.
    if (stored->fingerprint != fingerprint) {
        return Decision::mismatch;
    }
    switch (stored->kind) {
    case RecordKind::claim:
        return Decision::in_flight;
    case RecordKind::response:
        record = *stored;
        return Decision::replay;
    case RecordKind::unreplayable:
        return Decision::unreplayable;
    }
    return Decision::corrupt;  // unreachable: decode_record checked the kind
}

}  // namespace idem
