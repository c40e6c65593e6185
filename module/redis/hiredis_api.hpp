// redis/hiredis_api.hpp — hiredis API differences between the versions built
// against (0.14 on Debian 12, 1.2 on Debian 13 and Ubuntu 24.04), told from
// its declarations rather than its version macros.
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

// int before hiredis 1.0, size_t since; never negative (a nil array is createNil).
using ArrayCount = detail::SecondParameter<decltype(redisReplyObjectFunctions::createArray)>::type;

}  // namespace idem::redis
