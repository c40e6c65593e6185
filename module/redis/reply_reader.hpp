// redis/reply_reader.hpp — hiredis's reply parser, with a bound on the
// element count of the arrays it accepts, and reply objects made without
// calloc().
#pragma once

struct redisReader;
struct redisReply;

namespace idem::redis {

// A reader whose replies are hiredis's redisReply, freed with free_reply()
// (not freeReplyObject); a string's bytes (reply->str) are a malloc() block
// of their own, which may be taken over (reply->str set to nullptr then).
// Arrays of more than 16 elements are refused as a protocol error, or of
// more than 16384 with `large` (the cluster's slot map). nullptr when out
// of memory.
redisReader* create_reply_reader(bool large) noexcept;

// Whether the reader holds bytes no reply took yet: without them,
// redisReaderGetReply() has nothing to give.
bool has_unread(const redisReader* reader) noexcept;

// Frees a reply of such a reader, with its elements; nullptr is ignored.
void free_reply(redisReply* reply) noexcept;

}  // namespace idem::redis
