// redis/scripts.hpp — every Lua script the Redis store runs: those that
// store, release, renew and put back a claim, fenced by the claim record,
// and their SHA-1s (script_calls.cpp sends them by EVALSHA, and as EVAL
// after NOSCRIPT); and the short ones sent whole by EVAL (Redis keeps them
// compiled; no SHA-1, no NOSCRIPT round): the fenced claim, a live log's
// read, the look at a response's pieces, the operator's peek and purge.
#pragma once

#include <string_view>

namespace idem::redis {

struct Script {
    std::string_view body;
    const char* purpose;
    char sha1[41];
};

extern Script complete_script;
extern Script release_script;
extern Script renew_script;
extern Script restore_script;

extern const std::string_view fenced_claim_script;
extern const std::string_view live_read_script;
extern const std::string_view pieces_look_script;
extern const std::string_view peek_script;
extern const std::string_view purge_script;

// Fills in each script's SHA-1; false when OpenSSL cannot.
bool digest_scripts() noexcept;

}  // namespace idem::redis
