// redis/replies.hpp — the replies the Redis store reads, in the core's
// terms: to the claim, `SET key claim NX PX ttl GET` (decide.hpp takes it
// from there), and to a response stored within the claim's lease, `SET key
// record PX ttl XX GET` (lease.hpp). Pure: hiredis's reply structure only.
#pragma once

#include <hiredis/hiredis.h>

#include <string_view>

namespace idem::redis {

// What a reply to `SET ... GET` holds: nil, a string (into `value`), or
// anything else (an error, no reply at all).
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

// What `SET key record PX ttl XX GET` found under the key, and so did.
enum class LeasedStore {
    stored,    // our claim (or, sent again after a lost reply, our record): stored
    gone,      // nothing: the claim had expired, nothing was written
    not_ours,  // another value, now overwritten: Redis lost our claim, or the lease did not hold
    unusable,  // an error or no reply: nothing is known
};

inline LeasedStore read_leased_store_reply(const redisReply* reply, std::string_view claim, std::string_view record,
                                           std::string_view& found) noexcept
{
    Bulk bulk = read_bulk(reply, found);
    if (bulk == Bulk::string) {
        return found == claim || found == record ? LeasedStore::stored : LeasedStore::not_ours;
    }
    return bulk == Bulk::nil ? LeasedStore::gone : LeasedStore::unusable;
}

}  // namespace idem::redis
