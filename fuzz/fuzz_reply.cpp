// fuzz_reply.cpp — libFuzzer target: the module's Redis reply handling and
// command writing.
//
// The first input byte picks the mode:
//   0x00-0x7f  replies: the rest is what Redis sends, fed to a hiredis
//              redisReader in chunks of (byte & 0x7f) bytes (0: all at once),
//              as Connection::read() does with what recv() returns; every
//              complete reply is read as the claim's reply
//              (redis/replies.hpp) and decided (decide.hpp) with a fixed
//              request fingerprint (fuzz::fixed_digest()), checked against
//              what it must answer; on replay the record's headers are walked.
//   0x80-0xff  commands: the rest is argv, each argument a 2-byte big-endian
//              length then that many bytes (cut short at the end);
//              idem::redis::resp_write() must write exactly resp_size()
//              bytes, the same as hiredis's redisFormatCommandArgv(), and a
//              redisReader must read them back as the same arguments.
//
//   make fuzz                 (all targets; see the Makefile)
//   build/fuzz/fuzz_reply -max_len=4096 build/fuzz/corpus/fuzz_reply
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "redis/hiredis_api.hpp"
#include "compression.hpp"
#include "decide.hpp"
#include "record.hpp"
#include "redis/replies.hpp"
#include "redis/resp.hpp"

namespace {

using idem::Outcome;
using idem::Record;
using idem::RecordKind;

// What the request must get, from the definitions in decide.hpp.
Outcome expected_outcome(const redisReply* reply)
{
    if (reply->type == REDIS_REPLY_NIL) {
        return Outcome::fresh;
    }
    if (reply->type != REDIS_REPLY_STRING) {
        return Outcome::unavailable;
    }
    idem::RecordFlaw flaw = idem::RecordFlaw::none;
    const std::optional<Record> stored =
        idem::decode_record(std::string_view(reply->str, reply->len), &flaw);
    if (flaw == idem::RecordFlaw::compressed) {
        // decided before it is opened: its fingerprint, else opened later (unverifiable until then)
        idem::RecordFlaw head_flaw = idem::RecordFlaw::none;
        const auto head = idem::compressed_head(std::string_view(reply->str, reply->len), &head_flaw);
        if (!head) {
            return head_flaw == idem::RecordFlaw::none ? Outcome::unavailable : Outcome::unverifiable;
        }
        return head->fingerprint != fuzz::fixed_digest() ? Outcome::mismatch : Outcome::unverifiable;
    }
    if (flaw != idem::RecordFlaw::none) {
        return Outcome::unverifiable;  // a response that must not be sent again
    }
    if (!stored) {
        return Outcome::unavailable;
    }
    if (stored->fingerprint != fuzz::fixed_digest()) {
        return Outcome::mismatch;
    }
    switch (stored->kind) {
    case RecordKind::claim:
        return Outcome::conflict;
    case RecordKind::response:
        return Outcome::replayed;
    case RecordKind::unreplayable:
        return Outcome::unreplayable;
    }
    return Outcome::unavailable;
}

// hiredis 0.14 callocs an array reply's element table for the announced
// count (up to INT_MAX) before any element arrives, and treats calloc
// failing as a reader error. Under ASan a huge table is a reported
// out-of-memory, and a merely large one makes freeReplyObject() walk it:
// counts no input of -max_len bytes could complete are failed here the way
// calloc would fail them. Everything else is hiredis's own reply building.
constexpr idem::redis::ArrayCount max_array_elements = 1 << 12;
void* (*hiredis_create_array)(const redisReadTask*, idem::redis::ArrayCount) = nullptr;

void* create_array(const redisReadTask* task, idem::redis::ArrayCount elements)
{
    if (elements > max_array_elements) {
        return nullptr;
    }
    return hiredis_create_array(task, elements);
}

redisReader* create_reader()
{
    static redisReplyObjectFunctions functions;
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
        return nullptr;
    }
    if (hiredis_create_array == nullptr) {
        functions = *reader->fn;
        hiredis_create_array = functions.createArray;
        functions.createArray = create_array;
    }
    reader->fn = &functions;
    return reader;
}

bool inside(std::string_view part, const redisReply* reply)
{
    return part.empty()
           || (part.data() >= reply->str && part.data() + part.size() <= reply->str + reply->len);
}

void check_reply(const redisReply* reply)
{
    Record record{};
    std::string_view found;
    idem::Unusable why = idem::Unusable::no;
    Outcome d = Outcome::unavailable;
    switch (idem::redis::read_claim_reply(reply, found)) {
    case idem::redis::ClaimReply::granted: d = Outcome::fresh; break;
    case idem::redis::ClaimReply::unusable: d = Outcome::unavailable; break;
    case idem::redis::ClaimReply::found: d = idem::decide_stored(found, fuzz::fixed_digest(), record, why); break;
    }
    FUZZ_CHECK(d == expected_outcome(reply));
    idem::RecordFlaw flaw = idem::RecordFlaw::none;
    const bool refused = reply->type == REDIS_REPLY_STRING && !idem::decode_record(found, &flaw);
    idem::RecordFlaw head_flaw = idem::RecordFlaw::none;
    const bool bad_head = flaw == idem::RecordFlaw::compressed && !idem::compressed_head(found, &head_flaw)
                          && head_flaw == idem::RecordFlaw::none;
    FUZZ_CHECK((why == idem::Unusable::not_a_record) == (refused && (flaw == idem::RecordFlaw::none || bad_head)));
    if (d != Outcome::replayed) {
        return;
    }
    FUZZ_CHECK(record.kind == RecordKind::response);
    FUZZ_CHECK(record.fingerprint == fuzz::fixed_digest());
    FUZZ_CHECK(inside(record.headers, reply) && inside(record.body, reply));

    // What replay.cpp does with it: every header, then the body.
    idem::HeaderReader headers(record);
    idem::Header h;
    unsigned count = 0;
    unsigned s = 0;
    while (headers.next(h)) {
        FUZZ_CHECK(inside(h.name, reply) && inside(h.value, reply));
        for (char c : h.name) s += static_cast<unsigned char>(c);
        for (char c : h.value) s += static_cast<unsigned char>(c);
        ++count;
    }
    FUZZ_CHECK(count == record.header_count);
    for (char c : record.body) s += static_cast<unsigned char>(c);
    (void)s;
}

void fuzz_replies(std::size_t chunk, std::string_view stream)
{
    redisReader* reader = create_reader();
    if (reader == nullptr) {
        return;
    }
    if (chunk == 0) {
        chunk = stream.size() == 0 ? 1 : stream.size();
    }
    bool failed = false;
    while (!failed && !stream.empty()) {
        // A heap copy of exactly one read: ASan sees reads past it.
        const std::size_t n = stream.size() < chunk ? stream.size() : chunk;
        std::vector<char> read(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(n));
        stream.remove_prefix(n);
        if (redisReaderFeed(reader, read.data(), read.size()) != REDIS_OK) {
            break;
        }
        for (;;) {
            void* reply = nullptr;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
                failed = true;  // the module drops the connection
                break;
            }
            if (reply == nullptr) {
                break;  // incomplete: wait for the next read
            }
            check_reply(static_cast<const redisReply*>(reply));
            freeReplyObject(reply);
        }
    }
    redisReaderFree(reader);
}

void fuzz_command(std::string_view rest)
{
    std::vector<std::string> args;
    while (rest.size() >= 2 && args.size() < 64) {
        const std::size_t len = (static_cast<unsigned char>(rest[0]) << 8)
                                | static_cast<unsigned char>(rest[1]);
        rest.remove_prefix(2);
        args.emplace_back(rest.substr(0, len));
        rest.remove_prefix(args.back().size());
    }
    const int argc = static_cast<int>(args.size());
    std::vector<const char*> argv;
    std::vector<std::size_t> argv_len;
    for (const std::string& a : args) {
        argv.push_back(a.data());
        argv_len.push_back(a.size());
    }

    const std::size_t size = idem::redis::resp_size(argc, argv_len.data());
    std::vector<char> out(size);
    char* end = idem::redis::resp_write(out.data(), argc, argv.data(), argv_len.data());
    FUZZ_CHECK(end == out.data() + size);

    // The same bytes as hiredis's own formatter.
    char* formatted = nullptr;
    const int flen = redisFormatCommandArgv(&formatted, argc, argv.data(), argv_len.data());
    FUZZ_CHECK(flen >= 0 && formatted != nullptr);
    FUZZ_CHECK(static_cast<std::size_t>(flen) == size);
    FUZZ_CHECK(std::memcmp(formatted, out.data(), size) == 0);
    redisFreeCommand(formatted);

    // And hiredis reads them back as the arguments.
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
        return;
    }
    FUZZ_CHECK(redisReaderFeed(reader, out.data(), out.size()) == REDIS_OK);
    void* parsed = nullptr;
    FUZZ_CHECK(redisReaderGetReply(reader, &parsed) == REDIS_OK);
    FUZZ_CHECK(parsed != nullptr);
    const redisReply* r = static_cast<const redisReply*>(parsed);
    FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY);
    FUZZ_CHECK(r->elements == args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
        const redisReply* e = r->element[i];
        FUZZ_CHECK(e->type == REDIS_REPLY_STRING);
        FUZZ_CHECK(std::string_view(e->str, e->len) == args[i]);
    }
    freeReplyObject(parsed);
    void* more = nullptr;
    FUZZ_CHECK(redisReaderGetReply(reader, &more) == REDIS_OK && more == nullptr);
    redisReaderFree(reader);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] & 0x80) {
        fuzz_command(rest);
    } else {
        fuzz_replies(data[0] & 0x7f, rest);
    }
    return 0;
}
