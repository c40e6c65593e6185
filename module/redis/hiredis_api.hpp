// redis/hiredis_api.hpp — what differs in hiredis's API between the
// versions the module builds against (Debian 12 has hiredis 0.14, Debian 13
// and Ubuntu 24.04 have 1.2), told from hiredis's own declarations rather
// than its version macros.
#pragma once

#include <hiredis/hiredis.h>

namespace idem::redis {

namespace detail {
template <typename F>
struct SecondParameter;
template <typename R, typename A, typename B>
struct SecondParameter<R (*)(A, B)> {
    using type = B;
};
}  // namespace detail

// An array reply's element count as hiredis hands it to
// redisReplyObjectFunctions::createArray: int before hiredis 1.0, size_t
// since. hiredis never hands over a negative one (a nil array is createNil).
using ArrayCount = detail::SecondParameter<decltype(redisReplyObjectFunctions::createArray)>::type;

}  // namespace idem::redis
