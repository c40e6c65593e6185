// redis/reply_reader.hpp — hiredis's reply parser with bounded arrays and
// replies made without calloc(), plus shortcuts for a transaction's
// OK/QUEUED and a bare nil.
#pragma once

struct redisReader;
struct redisReply;

namespace idem::redis {

// Free replies with free_reply(), not freeReplyObject. A top-level bulk
// string's bytes are their own malloc() block and may be taken over
// (reply->str set to nullptr); an element's are not. Arrays over 16 elements
// (16384 with `large`, the cluster's slot map) are a protocol error.
// nullptr when out of memory.
redisReader* create_reply_reader(bool large) noexcept;

// Without them, redisReaderGetReply() has nothing to give.
bool has_unread(const redisReader* reader) noexcept;

// The answers before a transaction's EXEC, which nobody reads, without making
// replies. False, taking nothing, when something else comes next, it is not
// whole yet, or a reply is half read.
bool skip_plain_status(redisReader* reader) noexcept;

// A bare nil at the front (`$-1`, a new key's claim) is one shared reply,
// taken without parsing, that free_reply() leaves alone.
int read_reply(redisReader* reader, void** reply) noexcept;

// Never what it holds.
const char* reply_kind(int type) noexcept;

// nullptr is ignored.
void free_reply(redisReply* reply) noexcept;

}  // namespace idem::redis
