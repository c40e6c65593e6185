// redis/scripts.hpp — the Lua scripts that store, release, renew and put
// back a claim on Redis, fenced by the claim record, and their SHA-1s
// (script_calls.cpp sends them by EVALSHA, and as EVAL after NOSCRIPT).
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

// Fills in each script's SHA-1; false when OpenSSL cannot.
bool digest_scripts() noexcept;

}  // namespace idem::redis
