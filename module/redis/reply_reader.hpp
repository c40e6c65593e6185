// redis/reply_reader.hpp — hiredis's reply parser, with a bound on the
// element count of the arrays it accepts.
#pragma once

struct redisReader;

namespace idem::redis {

// A reader with hiredis's own reply objects; arrays of more than 16
// elements are refused as a protocol error, or of more than 16384 with
// `large` (the cluster's slot map). nullptr when out of memory.
redisReader* create_reply_reader(bool large) noexcept;

}  // namespace idem::redis
