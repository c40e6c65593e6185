// redis/cluster.hpp — Redis Cluster's rules, pure (no nginx): the hash slot
// of a key, the MOVED and ASK redirections, and the slot map in a CLUSTER
// SLOTS reply. The router (cluster_router.cpp) acts on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

struct redisReply;

namespace idem::redis {

constexpr unsigned cluster_slot_count = 16384;

// CRC16 (XMODEM) of the key, or of its {hash tag}, modulo 16384.
unsigned key_slot(std::string_view key) noexcept;

struct Redirect {
    bool ask;  // ASK (this command only), else MOVED (the slot has moved)
    unsigned slot;
    std::string_view host;  // empty: the node that answered
    unsigned port;
};

// "MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381", "MOVED 3999 :6381".
std::optional<Redirect> parse_redirect(std::string_view error) noexcept;

// One range of a CLUSTER SLOTS reply and the address of its master; an
// empty host means the node that answered.
struct SlotRange {
    unsigned first;
    unsigned last;
    std::string_view host;
    unsigned port;
};

// Checks that `reply` is a well-formed CLUSTER SLOTS reply, then calls
// `each` for every range. False (and `each` never called) when it is not.
bool parse_cluster_slots(const redisReply* reply, void (*each)(void* data, const SlotRange& range),
                         void* data) noexcept;

}  // namespace idem::redis
