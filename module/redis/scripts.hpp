// redis/scripts.hpp — the Redis store's Lua scripts: the fenced settles, sent
// by EVALSHA (EVAL after NOSCRIPT), and short ones sent whole by EVAL (Redis
// keeps them compiled: no NOSCRIPT round).
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
