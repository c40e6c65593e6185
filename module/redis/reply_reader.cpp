// redis/reply_reader.cpp — see reply_reader.hpp.
// hiredis reserves room for whatever count an array announces, so a broken
// or hostile server sending "*2147483647" could make a worker allocate
// gigabytes; the store's replies are never arrays (Sentinel's: 2; the slot
// map: one per slot), so longer ones are refused before allocating.
// Replies use malloc() where hiredis uses calloc(), which glibc serves
// without its per-thread cache (about as costly as the rest of reading a
// reply); an array's elements and short strings follow their object in one
// allocation, a top-level bulk string has its own so a request can keep it.

#include "reply_reader.hpp"

#include <cstdlib>
#include <cstring>

#include "hiredis_api.hpp"

namespace idem::redis {
namespace {

constexpr ArrayCount max_reply_elements = 16;
constexpr ArrayCount max_large_reply_elements = 16384;

redisReplyObjectFunctions small_functions;
redisReplyObjectFunctions large_functions;
bool functions_ready = false;

// Never freed.
redisReply shared_nil = [] {
    redisReply r{};
    r.type = REDIS_REPLY_NIL;
    return r;
}();

char* inline_bytes(redisReply* r) noexcept
{
    return reinterpret_cast<char*>(r + 1);
}

// The rest zero; linked into its array if it is an element.
redisReply* new_reply(const redisReadTask* task, int type, size_t extra) noexcept
{
    auto* r = static_cast<redisReply*>(std::malloc(sizeof(redisReply) + extra));
    if (r == nullptr) {
        return nullptr;
    }
    *r = redisReply{};
    r->type = type;
    if (task->parent != nullptr) {
        static_cast<redisReply*>(task->parent->obj)->element[task->idx] = r;
    }
    return r;
}

void* create_string(const redisReadTask* task, char* str, size_t len)
{
    bool own_block = task->type == REDIS_REPLY_STRING && task->parent == nullptr;
    char* bytes = own_block ? static_cast<char*>(std::malloc(len + 1)) : nullptr;
    if (own_block && bytes == nullptr) {
        return nullptr;
    }
    redisReply* r = new_reply(task, task->type, own_block ? 0 : len + 1);  // string, status or error
    if (r == nullptr) {
        std::free(bytes);
        return nullptr;
    }
    if (!own_block) {
        bytes = inline_bytes(r);
    }
    std::memcpy(bytes, str, len);
    bytes[len] = '\0';
    r->str = bytes;
    r->len = len;
    return r;
}

void* create_array(const redisReadTask* task, ArrayCount elements, ArrayCount max_elements)
{
    if (elements > max_elements) {
        return nullptr;
    }
    size_t vector = elements > 0 ? static_cast<size_t>(elements) * sizeof(redisReply*) : 0;
    redisReply* r = new_reply(task, task->type, vector);
    if (r != nullptr && elements > 0) {
        r->element = reinterpret_cast<redisReply**>(inline_bytes(r));
        std::memset(r->element, 0, vector);  // a reply cut short is freed with the elements it has
        r->elements = static_cast<size_t>(elements);
    }
    return r;
}

void* create_small_array(const redisReadTask* task, ArrayCount elements)
{
    return create_array(task, elements, max_reply_elements);
}

void* create_large_array(const redisReadTask* task, ArrayCount elements)
{
    return create_array(task, elements, max_large_reply_elements);
}

void* create_integer(const redisReadTask* task, long long value)
{
    redisReply* r = new_reply(task, REDIS_REPLY_INTEGER, 0);
    if (r != nullptr) {
        r->integer = value;
    }
    return r;
}

void* create_nil(const redisReadTask* task)
{
    return new_reply(task, REDIS_REPLY_NIL, 0);  // a nil bulk string or array
}

void free_object(void* reply)
{
    free_reply(static_cast<redisReply*>(reply));
}

}  // namespace

redisReader* create_reply_reader(bool large) noexcept
{
    if (!functions_ready) {
        // hiredis's table, for what a newer hiredis adds (RESP3 types, made
        // its own way: free_reply frees those too)
        redisReader* probe = redisReaderCreate();
        if (probe == nullptr) {
            return nullptr;
        }
        small_functions = *probe->fn;
        redisReaderFree(probe);
        small_functions.createString = create_string;
        small_functions.createInteger = create_integer;
        small_functions.createNil = create_nil;
        small_functions.freeObject = free_object;
        large_functions = small_functions;
        small_functions.createArray = create_small_array;
        large_functions.createArray = create_large_array;
        functions_ready = true;
    }
    return redisReaderCreateWithFunctions(large ? &large_functions : &small_functions);
}

bool has_unread(const redisReader* reader) noexcept
{
    return reader->pos < reader->len;
}

bool skip_plain_status(redisReader* reader) noexcept
{
    if (reader->err != 0 || reader->ridx != -1) {
        return false;  // broken, or in the middle of a reply
    }
    const char* unread = reader->buf + reader->pos;
    std::size_t size = reader->len - reader->pos;
    // hiredis trims what was read at its next reply
    if (size >= 9 && std::memcmp(unread, "+QUEUED\r\n", 9) == 0) {
        reader->pos += 9;
        return true;
    }
    if (size >= 5 && std::memcmp(unread, "+OK\r\n", 5) == 0) {
        reader->pos += 5;
        return true;
    }
    return false;
}

int read_reply(redisReader* reader, void** reply) noexcept
{
    // hiredis trims what was read once 1 KB of it lies before its cursor:
    // past that it reads, so that the buffer stays bounded.
    if (reader->err == 0 && reader->ridx == -1 && reader->pos < 1024 && reader->len - reader->pos >= 5
        && std::memcmp(reader->buf + reader->pos, "$-1\r\n", 5) == 0) {
        reader->pos += 5;
        *reply = &shared_nil;
        return REDIS_OK;
    }
    return redisReaderGetReply(reader, reply);
}

const char* reply_kind(int type) noexcept
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "string";
    case REDIS_REPLY_ARRAY:
        return "array";
    case REDIS_REPLY_INTEGER:
        return "integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "status";
    case REDIS_REPLY_ERROR:
        return "error";
    default:
        return "other";
    }
}

void free_reply(redisReply* r) noexcept
{
    if (r == nullptr || r == &shared_nil) {
        return;
    }
    if (r->element != nullptr) {
        for (size_t i = 0; i < r->elements; i++) {
            free_reply(r->element[i]);
        }
        if (reinterpret_cast<char*>(r->element) != inline_bytes(r)) {
            std::free(r->element);
        }
    }
    if (r->str != inline_bytes(r)) {
        std::free(r->str);
    }
    std::free(r);
}

}  // namespace idem::redis
