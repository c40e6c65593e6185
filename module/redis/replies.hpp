// redis/replies.hpp — the Redis replies the store reads, in the core's terms:
// the claim, the leased store (lease.hpp), the conditional writes (info.hpp).
// Pure: hiredis's reply structure only. See docs/design.md#store-protocols.
#pragma once

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdint>
#include <string_view>

#include "../record.hpp"

namespace idem::redis {

// nil, a string (into `value`), or anything else (an error, no reply).
enum class Bulk { nil, string, other };

inline Bulk read_bulk(const redisReply* reply, std::string_view& value) noexcept
{
    if (reply == nullptr || (reply->type != REDIS_REPLY_NIL && reply->type != REDIS_REPLY_STRING)) {
        return Bulk::other;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        return Bulk::nil;
    }
    value = {reply->str, reply->len};
    return Bulk::string;
}

enum class ClaimReply {
    granted,   // nil: the key was free and is now ours
    found,     // a string: the record already there
    unusable,  // an error, no reply, or anything SET ... GET cannot give: never guess
};

inline ClaimReply read_claim_reply(const redisReply* reply, std::string_view& found) noexcept
{
    Bulk bulk = read_bulk(reply, found);
    return bulk == Bulk::nil ? ClaimReply::granted : bulk == Bulk::string ? ClaimReply::found : ClaimReply::unusable;
}

// The record already there, as `SET ... GET` gives it, or, granted, Redis's
// TIME (seconds, microseconds), which becomes the fence in microseconds since
// the epoch (docs/design.md#the-fence).
inline ClaimReply read_fenced_claim_reply(const redisReply* reply, std::string_view& found,
                                          std::uint64_t& fence) noexcept
{
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
        ClaimReply kind = read_claim_reply(reply, found);
        return kind == ClaimReply::granted ? ClaimReply::unusable : kind;  // the script never answers nil
    }
    std::uint64_t parts[2] = {0, 0};
    if (reply->elements != 2) {
        return ClaimReply::unusable;
    }
    for (std::size_t i = 0; i < 2; i++) {
        const redisReply* part = reply->element[i];
        if (part == nullptr || part->type != REDIS_REPLY_STRING || part->len > 12) {
            return ClaimReply::unusable;
        }
        const char* end = part->str + part->len;
        std::from_chars_result read = std::from_chars(part->str, end, parts[i]);
        if (read.ec != std::errc() || read.ptr != end) {
            return ClaimReply::unusable;
        }
    }
    if (parts[1] >= 1000000 || parts[0] == 0) {
        return ClaimReply::unusable;
    }
    fence = parts[0] * 1000000 + parts[1];
    return ClaimReply::granted;
}

// What the leased store found under the key, and so did.
enum class LeasedStore {
    stored,       // our claim (or, sent again after a lost reply, our record): stored
    gone,         // nothing: the claim had expired, nothing was written
    same_intent,  // another request's stored response (or 410 marker) of our fingerprint, now replaced
                  // by ours: equal in meaning, nothing to put back
    took_claim,   // another request's claim (of any fingerprint), now replaced by ours and not put
                  // back: put back, it could outlive its request's store and let a retry execute
                  // again (docs/design.md#the-lease)
    not_ours,     // another stored value, now overwritten: Redis lost our claim, or the lease did
                  // not hold; put back with the expiry it had
    unusable,     // an error or no reply: nothing is known
};

struct LeasedStoreReply {
    LeasedStore what;
    std::string_view found;     // the value overwritten (stored, same_intent, took_claim, not_ours)
    long long expires_at = -1;  // not_ours: its expiry, Unix time in ms by Redis's clock; -1: none
};

// A stored response or marker of our claim's fingerprint means what ours means.
inline bool same_intent(std::string_view claim, std::string_view found) noexcept
{
    std::optional<Record> ours = decode_record(claim);
    std::optional<Record> theirs = decode_record(found);
    return ours && theirs && ours->kind == RecordKind::claim && theirs->kind != RecordKind::claim
           && theirs->fingerprint == ours->fingerprint;
}

// `found` is already known not to equal our claim.
inline bool another_claim(std::string_view found) noexcept
{
    std::optional<Record> theirs = decode_record(found);
    return theirs && theirs->kind == RecordKind::claim;
}

// The EXEC's reply: [PEXPIRETIME's, SET ... GET's].
inline LeasedStoreReply read_leased_store_reply(const redisReply* reply, std::string_view claim,
                                                std::string_view record) noexcept
{
    LeasedStoreReply out{LeasedStore::unusable, {}};
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_INTEGER) {
        return out;
    }
    switch (read_bulk(reply->element[1], out.found)) {
    case Bulk::nil:
        out.what = LeasedStore::gone;
        break;
    case Bulk::string:
        out.what = out.found == claim || out.found == record ? LeasedStore::stored
                   : same_intent(claim, out.found)             ? LeasedStore::same_intent
                   : another_claim(out.found)                  ? LeasedStore::took_claim
                                                               : LeasedStore::not_ours;
        out.expires_at = reply->element[0]->integer >= 0 ? reply->element[0]->integer : -1;
        break;
    case Bulk::other:
        break;
    }
    return out;
}

// Read as the fenced scripts' answers (scripts.cpp): 1 done, or done by an
// attempt whose reply was lost; 0 the claim was not there; -1 anything else.
//
// `SET key record IFEQ claim PX ttl GET`: our claim (stored now), our record
// (stored already), else not stored.
inline int read_conditional_store(const redisReply* reply, std::string_view claim, std::string_view record) noexcept
{
    std::string_view found;
    switch (read_bulk(reply, found)) {
    case Bulk::nil:
        return 0;
    case Bulk::string:
        return found == claim || found == record ? 1 : 0;
    case Bulk::other:
        break;
    }
    return -1;
}

// `SET key claim IFEQ claim PX lock_ttl`: OK, or nil when the claim is gone.
inline int read_conditional_renewal(const redisReply* reply) noexcept
{
    if (reply != nullptr && reply->type == REDIS_REPLY_STATUS && std::string_view{reply->str, reply->len} == "OK") {
        return 1;
    }
    return reply != nullptr && reply->type == REDIS_REPLY_NIL ? 0 : -1;
}

// `DELIFEQ key claim` or `DELEX key IFEQ claim`. Sent again after a lost
// reply it may find the key gone by its own first attempt: 0 then counts as done.
inline int read_conditional_release(const redisReply* reply, bool sent_before) noexcept
{
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER || (reply->integer != 0 && reply->integer != 1)) {
        return -1;
    }
    return reply->integer == 1 || sent_before ? 1 : 0;
}

}  // namespace idem::redis
