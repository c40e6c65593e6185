// fuzz_cluster.cpp — libFuzzer target: Redis Cluster's rules (redis/cluster.*).
//
// The first input byte picks the mode, the rest is the input:
//   0  parse_redirect(): an accepted redirection has a slot below 16384, a
//      port of 1..65535, a host inside the input, and says MOVED or ASK as
//      the input does;
//   1  key_slot(): below 16384, and a key with a non-empty {tag} hashes as
//      its tag does;
//   2  a CLUSTER SLOTS reply (RESP bytes, hiredis reader with the module's
//      16384-element array bound): parse_cluster_slots() either refuses it
//      without a call, or calls once per top-level element with ranges
//      inside 0..16383, first <= last, and a port of 1..65535.
//
//   make fuzz                 (all targets; see the Makefile)
//   build/fuzz/fuzz_cluster -max_len=4096 build/fuzz/corpus/fuzz_cluster
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "redis/hiredis_api.hpp"
#include "redis/cluster.hpp"

namespace {

using idem::redis::SlotRange;

void fuzz_redirect(std::string_view in)
{
    const auto r = idem::redis::parse_redirect(in);
    if (!r) {
        return;
    }
    FUZZ_CHECK(r->slot < idem::redis::cluster_slot_count);
    FUZZ_CHECK(r->port >= 1 && r->port <= 65535);
    FUZZ_CHECK(r->host.empty() || (r->host.data() >= in.data() && r->host.data() + r->host.size() <= in.data() + in.size()));
    FUZZ_CHECK(r->ask ? in.substr(0, 4) == "ASK " : in.substr(0, 6) == "MOVED ");
}

void fuzz_slot(std::string_view key)
{
    const unsigned slot = idem::redis::key_slot(key);
    FUZZ_CHECK(slot < idem::redis::cluster_slot_count);
    const std::size_t open = key.find('{');
    if (open == std::string_view::npos) {
        return;
    }
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
        const std::string_view tag = key.substr(open + 1, close - open - 1);
        if (tag.find('{') == std::string_view::npos) {
            FUZZ_CHECK(slot == idem::redis::key_slot(tag));
        }
    }
}

// The module's reader refuses arrays over 16384 elements (cluster
// connections); the same bound here keeps hiredis from callocing for
// counts no input of -max_len bytes could complete.
void* (*hiredis_create_array)(const redisReadTask*, idem::redis::ArrayCount) = nullptr;
void* create_array(const redisReadTask* task, idem::redis::ArrayCount elements)
{
    return elements > 16384 ? nullptr : hiredis_create_array(task, elements);
}

struct Seen {
    std::size_t calls = 0;
};

void on_range(void* data, const SlotRange& r)
{
    static_cast<Seen*>(data)->calls++;
    FUZZ_CHECK(r.first <= r.last && r.last < idem::redis::cluster_slot_count);
    FUZZ_CHECK(r.port >= 1 && r.port <= 65535);
}

void fuzz_slots(std::string_view bytes)
{
    static redisReplyObjectFunctions functions;
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
        return;
    }
    if (hiredis_create_array == nullptr) {
        functions = *reader->fn;
        hiredis_create_array = functions.createArray;
        functions.createArray = create_array;
    }
    reader->fn = &functions;
    std::vector<char> copy(bytes.begin(), bytes.end());  // ASan sees reads past it
    void* reply = nullptr;
    if (redisReaderFeed(reader, copy.data(), copy.size()) == REDIS_OK
        && redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr) {
        const auto* r = static_cast<const redisReply*>(reply);
        Seen seen;
        if (idem::redis::parse_cluster_slots(r, on_range, &seen)) {
            FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && seen.calls == r->elements && seen.calls > 0);
        } else {
            FUZZ_CHECK(seen.calls == 0);
        }
        freeReplyObject(reply);
    }
    redisReaderFree(reader);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 3) {
    case 0: fuzz_redirect(rest); break;
    case 1: fuzz_slot(rest); break;
    default: fuzz_slots(rest); break;
    }
    return 0;
}
