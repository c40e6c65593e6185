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

const char* at_rest_reason(AtRest why) noexcept
{
    switch (why) {
    case AtRest::ok: return "it opens";
    case AtRest::plain: return "it is not encrypted, as idempotency_encrypt_key requires";
    case AtRest::no_keys: return "it is encrypted and no idempotency_encrypt_key is configured";
    case AtRest::unknown_key: return "sealed with a key that is not configured";
    case AtRest::altered: return "altered, or moved from another key";
    }
    return "";
}

Decision decide_at_rest(std::string_view key, std::string_view& value, const SecretKey* keys,
                        std::size_t key_count, const Digest& fingerprint, char* out, AtRest& why) noexcept
{
    Record record;
    why = AtRest::ok;
    if (!is_sealed(value)) {
        std::optional<Record> plain = key_count > 0 ? decode_record(value) : std::nullopt;
        if (plain && plain->kind != RecordKind::claim) {
            why = AtRest::plain;
            return Decision::unverifiable;
        }
        return decide_stored(value, fingerprint, record);
    }
    std::size_t length = 0;
    OpenStatus st = open_sealed(keys, key_count, key, value, out, length);
    if (st != OpenStatus::ok) {
        why = key_count == 0 ? AtRest::no_keys : st == OpenStatus::unknown_key ? AtRest::unknown_key : AtRest::altered;
        return Decision::unverifiable;
    }
    value = {out, length};
    return decide_stored(value, fingerprint, record);
}

}  // namespace idem
