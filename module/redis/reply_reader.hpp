// redis/reply_reader.hpp — hiredis's reply parser, with a bound on the
// element count of the arrays it accepts, and reply objects made without
// calloc(); a transaction's OK and QUEUED taken without making replies of
// them, a bare nil without parsing it; what a debug line may say of a reply.
#pragma once

struct redisReader;
struct redisReply;

namespace idem::redis {

// A reader whose replies are hiredis's redisReply, freed with free_reply()
// (not freeReplyObject); the bytes of a bulk string that is the reply
// itself (reply->str) are a malloc() block of their own, which may be taken
// over (reply->str set to nullptr then); an element's are not.
// Arrays of more than 16 elements are refused as a protocol error, or of
// more than 16384 with `large` (the cluster's slot map). nullptr when out
// of memory.
redisReader* create_reply_reader(bool large) noexcept;

// Whether the reader holds bytes no reply took yet: without them,
// redisReaderGetReply() has nothing to give.
bool has_unread(const redisReader* reader) noexcept;

// Takes a bare `+OK` or `+QUEUED` off the front of what the reader holds
// unread, as redisReaderGetReply() would read it, without making a reply
// of it: the answers a transaction gets before its EXEC's, which nobody
// reads. False, taking nothing, when something else comes next, when it
// is not whole yet, or when a reply is half read.
bool skip_plain_status(redisReader* reader) noexcept;

// redisReaderGetReply(), but a whole bare nil at the front (`$-1`, what a
// claim of a new key gets) is taken without hiredis's parsing, as one
// shared nil reply that free_reply() leaves alone.
int read_reply(redisReader* reader, void** reply) noexcept;

// For the debug trace: what kind of reply came, never what it holds.
const char* reply_kind(int type) noexcept;

// Frees a reply of such a reader, with its elements; nullptr is ignored.
void free_reply(redisReply* reply) noexcept;

}  // namespace idem::redis
