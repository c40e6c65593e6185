// redis/scripts.cpp — see scripts.hpp.

#include "scripts.hpp"

#include <openssl/evp.h>

#include "../fingerprint.hpp"

namespace idem::redis {

// ARGV[1] is the claim record: only its holder may store or release. Each
// also answers 1 when already done, so a resend after a lost reply is not
// mistaken for a lost claim.
Script complete_script{
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end "
    "if v == ARGV[2] then return 1 end return 0",
    "store the response", {}};

Script release_script{
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end "
    "if v == false then return 1 end return 0",
    "release the key", {}};

Script renew_script{
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    "renew the claim", {}};

// Puts back what a leased store overwrote (never a claim) unless the key
// moved on: ARGV[1] the store's record, ARGV[2] the value, ARGV[3] its
// expiry as PEXPIRETIME read it (Unix ms; empty: never), restored exactly.
Script restore_script{
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then "
    "if ARGV[3] == '' then redis.call('SET', KEYS[1], ARGV[2]) "
    "else redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3]) end return 1 end "
    "if v == ARGV[2] then return 1 end return 0",
    "put back the value a store overwrote", {}};

// With a fence (docs/design.md#the-fence): Redis's clock read in the same step.
const std::string_view fenced_claim_script =
    "local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET') "
    "if v then return v end return redis.call('TIME')";

// nil when gone: an empty GETRANGE alone cannot tell it from a log that did
// not grow.
const std::string_view live_read_script =
    "if redis.call('EXISTS', KEYS[1]) == 0 then return false end "
    "return redis.call('GETRANGE', KEYS[1], ARGV[1], -1)";

// One string, as pieces.hpp's look entries: a reply of many elements is
// refused on a data connection. The other keys differ from KEYS[1] in their
// last 8 characters (the index in hex), on the same slot.
const std::string_view pieces_look_script =
    "local base = string.sub(KEYS[1], 1, -9) local n = tonumber(ARGV[2]) local r = {} "
    "for i = 0, tonumber(ARGV[1]) - 1 do local k = base .. string.format('%08x', i) "
    "local name = redis.call('GETRANGE', k, 0, n - 1) "
    "r[i + 1] = struct.pack('>I4', redis.call('STRLEN', k)) .. name .. string.rep('\\0', n - #name) end "
    "return table.concat(r)";

// nil when absent.
const std::string_view peek_script =
    "local v = redis.call('GET', KEYS[1]) if not v then return false end "
    "return {v, redis.call('PTTL', KEYS[1])}";
// Only if the key still holds what was read.
const std::string_view purge_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

namespace {

bool digest(Script& script) noexcept
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_Digest(script.body.data(), script.body.size(), md, &md_len, EVP_sha1(), nullptr) != 1 || md_len != 20) {
        return false;
    }
    to_hex(md, 20, script.sha1);
    script.sha1[40] = '\0';
    return true;
}

}  // namespace

bool digest_scripts() noexcept
{
    return digest(complete_script) && digest(release_script) && digest(renew_script) && digest(restore_script);
}

}  // namespace idem::redis
