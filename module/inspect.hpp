// inspect.hpp — the operator's inspection of a store key as one JSON object,
// judged without opening anything sealed; never a raw key, headers, body or
// anything decrypted. Pure. See docs/design.md#inspect-and-purge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "decide.hpp"

namespace idem {

enum class KeyState : std::uint8_t {
    absent,        // nothing under the key: a request with it executes
    claimed,       // an original in flight
    stored,        // a response (plain, or sealed: then only its size is told)
    unreplayable,  // executed, its response cannot be replayed (410)
    unusable,      // a response record no gateway writes (410 response-unverifiable)
    foreign,       // not a record of the module (503)
    unjudged,      // a record the inspecting location's settings cannot open, which another
                   // location (a dictionary, a larger limit) or a later release may replay
};

enum class NotJudged : std::uint8_t {
    no,
    dictionary,     // compressed with a dictionary this location lacks
    too_large,      // larger than this location's idempotency_max_response_size (or piece size)
    later_release,  // of a later release's layout
};

std::string_view key_state_name(KeyState state) noexcept;

struct InspectFacts {
    std::string_view key_hash;   // the store key's hash (hex)
    std::string_view store;      // which store, as the configuration names it
    std::uint64_t now_ms = 0;    // Unix ms
    std::int64_t ttl_ms = -1;    // what the value has left; -1: no expiry
    std::uint64_t ttl_conf_ms = 0;   // idempotency_ttl where the inspection is made
    std::uint64_t wait_ms = 0;       // idempotency_wait there
    bool sealing = false;            // idempotency_encrypt_key there
    const SecretKey* seal_keys = nullptr;  // ... its keys: only their ids are looked at
    std::size_t seal_key_count = 0;
    ReplayLimits limits{SIZE_MAX, SIZE_MAX};  // what a replay there may hold (decide.hpp)
    // A compressed value opened by the caller with this location's settings;
    // nullopt when it did not, `not_opened` saying whether that is this
    // location's doing (not judged here) or the record's (unusable).
    std::optional<std::string_view> opened;
    NotJudged not_opened = NotJudged::no;
    // A secret of the running deployment: two keys' fingerprints compare,
    // nothing can be looked up from them.
    std::string_view fingerprint_key;
};

// nullopt: absent. A compressed response is stored until it turns out not to open.
KeyState key_state(std::optional<std::string_view> value) noexcept;

// A record this location cannot judge is `unjudged`, never `unusable`.
KeyState judged_state(std::optional<std::string_view> value, const InspectFacts& facts) noexcept;

// Returns its length, or 0 when `room` is too small.
std::size_t inspection_json(std::optional<std::string_view> value, const InspectFacts& facts, char* out,
                            std::size_t room) noexcept;

constexpr std::size_t inspection_room(std::size_t store_name) noexcept
{
    return 2048 + 6 * store_name;
}

}  // namespace idem
