// redis/cluster.hpp — Redis Cluster's rules, pure: slots, redirections and
// the CLUSTER SLOTS map.
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

// An empty host means the node that answered.
struct SlotRange {
    unsigned first;
    unsigned last;
    std::string_view host;
    unsigned port;
};

// False, with `each` never called, unless the whole reply is well formed.
bool parse_cluster_slots(const redisReply* reply, void (*each)(void* data, const SlotRange& range),
                         void* data) noexcept;

}  // namespace idem::redis
