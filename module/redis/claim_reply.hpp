// redis/claim_reply.hpp — the reply to the claim, `SET key claim NX PX ttl
// GET`, in the decision core's terms (decide.hpp). Pure: hiredis's reply
// structure only.
#pragma once

#include <hiredis/hiredis.h>

#include <string_view>

namespace idem::redis {

enum class ClaimReply {
    granted,   // nil: the key was free and is now ours
    found,     // a string: the record already there
    unusable,  // an error, no reply, or anything SET ... GET cannot give: never guess
};

inline ClaimReply read_claim_reply(const redisReply* reply, std::string_view& found) noexcept
{
    if (reply == nullptr) {
        return ClaimReply::unusable;
    }
    switch (reply->type) {
    case REDIS_REPLY_NIL:
        return ClaimReply::granted;
    case REDIS_REPLY_STRING:
        found = {reply->str, reply->len};
        return ClaimReply::found;
    default:
        return ClaimReply::unusable;
    }
}

}  // namespace idem::redis
