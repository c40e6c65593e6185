// decide.cpp — see decide.hpp.
#include "decide.hpp"

#include "compression.hpp"

namespace idem {
namespace {

// A compressed record, before it is opened: its fingerprint and form.
Outcome decide_compressed(std::string_view value, const Digest& fingerprint, Unusable& why) noexcept
{
    RecordFlaw flaw = RecordFlaw::none;
    std::optional<CompressedHead> head = compressed_head(value, &flaw);
    if (!head) {
        why = flaw == RecordFlaw::newer_version ? Unusable::newer_version : Unusable::damaged;
        return Outcome::unverifiable;
    }
    if (head->fingerprint != fingerprint) {
        return Outcome::mismatch;
    }
    why = Unusable::compressed;
    return Outcome::unverifiable;
}

}  // namespace

Outcome decide_stored(std::string_view value, const Digest& fingerprint, Record& record, Unusable& why) noexcept
{
    why = Unusable::no;
    RecordFlaw flaw = RecordFlaw::none;
    const std::optional<Record> stored = decode_record(value, &flaw);
    switch (flaw) {
    case RecordFlaw::none: break;
    case RecordFlaw::status: why = Unusable::bad_status; return Outcome::unverifiable;
    case RecordFlaw::header_name: why = Unusable::bad_header_name; return Outcome::unverifiable;
    case RecordFlaw::header_value: why = Unusable::bad_header_value; return Outcome::unverifiable;
    case RecordFlaw::newer_version: why = Unusable::newer_version; return Outcome::unverifiable;
    case RecordFlaw::compressed: return decide_compressed(value, fingerprint, why);
    case RecordFlaw::damaged: why = Unusable::damaged; return Outcome::unverifiable;
    }
    if (!stored) {
        why = Unusable::not_a_record;
        return Outcome::unavailable;
    }
    // The fingerprint check comes first for every kind: a key reused for a
    // different request is a client error whatever state the key is in.
    if (stored->fingerprint != fingerprint) {
        return Outcome::mismatch;
    }
    switch (stored->kind) {
    case RecordKind::claim:
        return Outcome::conflict;
    case RecordKind::response:
        record = *stored;
        return Outcome::replayed;
    case RecordKind::unreplayable:
        record = *stored;  // what the marker says
        return Outcome::unreplayable;
    }
    why = Unusable::not_a_record;  // unreachable: decode_record checked the kind
    return Outcome::unavailable;
}

const char* unusable_reason(Unusable why) noexcept
{
    switch (why) {
    case Unusable::no: return "it is usable";
    case Unusable::not_a_record: return "it is not a record of this module";
    case Unusable::plain: return "it is not encrypted, as idempotency_encrypt_key requires";
    case Unusable::no_keys: return "it is encrypted and no idempotency_encrypt_key is configured";
    case Unusable::unknown_key: return "sealed with a key that is not configured";
    case Unusable::altered: return "altered, or moved from another key";
    case Unusable::bad_status: return "its response has a status outside 200-599, and is never replayed";
    case Unusable::bad_header_name: return "its response has a header name that is not an HTTP token, and is never replayed";
    case Unusable::bad_header_value: return "its response has a header value with CR, LF or NUL, and is never replayed";
    case Unusable::newer_version: return "it is a record of a later release's layout, which this one does not read";
    case Unusable::compressed: return "it is compressed, and was not opened";
    case Unusable::broken_frame: return "its compressed form does not open (altered or cut short)";
    case Unusable::too_large: return "its response is larger than idempotency_max_response_size allows here";
    case Unusable::unknown_dictionary:
        return "it was compressed with a dictionary that is not among this location's idempotency_compress_dictionary";
    case Unusable::damaged: return "it is a record of this module's layout, cut short or damaged";
    case Unusable::pieces_too_large: return "it is kept in pieces larger than idempotency_piece_size allows here";
    }
    return "";
}

Outcome decide_limits(Outcome decided, const Record& record, const ReplayLimits& limits, Unusable& why) noexcept
{
    if (decided != Outcome::replayed) {
        return decided;
    }
    const bool pieces = record.pieces.count != 0;
    const std::uint64_t body = pieces ? record.pieces.body_size : record.body.size();
    if (body > limits.max_body) {
        why = Unusable::too_large;
        return Outcome::unverifiable;
    }
    if (pieces && record.pieces.size > limits.max_piece) {
        why = Unusable::pieces_too_large;
        return Outcome::unverifiable;
    }
    return decided;
}

Outcome decide_at_rest(std::string_view key, std::string_view& value, const SecretKey* keys, std::size_t key_count,
                       const Digest& fingerprint, char* out, Record& record, Unusable& why) noexcept
{
    if (!is_sealed(value)) {
        std::optional<Record> plain = key_count > 0 ? decode_record(value) : std::nullopt;
        if (plain && plain->kind != RecordKind::claim) {
            why = Unusable::plain;
            return Outcome::unverifiable;
        }
        if (!plain && seal_remnant(value, keys, key_count)) {
            why = Unusable::altered;  // a sealed record of ours, damaged: never "not ours" (503)
            return Outcome::unverifiable;
        }
        return decide_stored(value, fingerprint, record, why);
    }
    std::size_t length = 0;
    OpenStatus st = open_sealed(keys, key_count, key, value, out, length);
    if (st != OpenStatus::ok) {
        why = key_count == 0 ? Unusable::no_keys : st == OpenStatus::unknown_key ? Unusable::unknown_key : Unusable::altered;
        return Outcome::unverifiable;
    }
    value = {out, length};
    return decide_stored(value, fingerprint, record, why);
}

Outcome decide_inflated(std::string_view& value, RecordInflater& inflater, const Dictionaries& dictionaries,
                        std::size_t max_plain, char* out, const Digest& fingerprint, Record& record,
                        Unusable& why) noexcept
{
    std::optional<CompressedHead> head = compressed_head(value);
    if (!head) {
        why = Unusable::damaged;
        return Outcome::unverifiable;
    }
    if (head->plain_size > max_plain) {
        why = Unusable::too_large;
        return Outcome::unverifiable;
    }
    const std::uint32_t dictionary = frame_dictionary(head->frame);
    if (dictionary != 0 && dictionaries.find(dictionary) == nullptr) {
        why = Unusable::unknown_dictionary;
        return Outcome::unverifiable;
    }
    std::optional<std::string_view> plain = inflater.inflate(value, *head, out, dictionaries);
    if (!plain) {
        why = Unusable::broken_frame;
        return Outcome::unverifiable;
    }
    value = *plain;  // of version 1 or 2 (compressed_head checked): decided as it stands
    return decide_stored(value, fingerprint, record, why);
}

}  // namespace idem
