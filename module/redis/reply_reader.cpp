// redis/reply_reader.cpp — see reply_reader.hpp.
//
// The store's replies are never arrays (nil, bulk strings, integers,
// status, errors), Sentinel's master address is an array of 2, and the
// cluster's slot map has at most one entry per slot. hiredis reserves room
// for whatever element count an array announces, so a broken or hostile
// server sending "*2147483647" could make a worker allocate and free
// gigabytes; longer arrays are refused before anything is allocated, and
// the connection is dropped.

#include "reply_reader.hpp"

#include <hiredis/hiredis.h>

namespace idem::redis {
namespace {

constexpr int max_reply_elements = 16;
constexpr int max_large_reply_elements = 16384;

redisReplyObjectFunctions small_functions;
redisReplyObjectFunctions large_functions;
void* (*default_create_array)(const redisReadTask*, int) = nullptr;

void* create_small_array(const redisReadTask* task, int elements)
{
    return elements > max_reply_elements ? nullptr : default_create_array(task, elements);
}

void* create_large_array(const redisReadTask* task, int elements)
{
    return elements > max_large_reply_elements ? nullptr : default_create_array(task, elements);
}

}  // namespace

redisReader* create_reply_reader(bool large) noexcept
{
    if (default_create_array == nullptr) {
        redisReader* probe = redisReaderCreate();
        if (probe == nullptr) {
            return nullptr;
        }
        small_functions = *probe->fn;
        redisReaderFree(probe);
        default_create_array = small_functions.createArray;
        large_functions = small_functions;
        small_functions.createArray = create_small_array;
        large_functions.createArray = create_large_array;
    }
    return redisReaderCreateWithFunctions(large ? &large_functions : &small_functions);
}

}  // namespace idem::redis
