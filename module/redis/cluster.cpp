// redis/cluster.cpp — see cluster.hpp.

#include "cluster.hpp"

#include <hiredis/hiredis.h>

#include <array>

namespace idem::redis {
namespace {

// The CRC16 that Redis Cluster uses (polynomial 0x1021, initial value 0),
// one table entry per byte value.
constexpr std::array<std::uint16_t, 256> make_crc_table()
{
    std::array<std::uint16_t, 256> table{};
    for (unsigned i = 0; i < 256; i++) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; bit++) {
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        }
        table[i] = crc;
    }
    return table;
}

constexpr auto crc_table = make_crc_table();

std::uint16_t crc16(std::string_view bytes) noexcept
{
    std::uint16_t crc = 0;
    for (unsigned char c : bytes) {
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc_table[((crc >> 8) ^ c) & 0xff]);
    }
    return crc;
}

bool parse_port(std::string_view s, unsigned& port) noexcept
{
    if (s.empty() || s.size() > 5) {
        return false;
    }
    unsigned n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') {
            return false;
        }
        n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (n == 0 || n > 65535) {
        return false;
    }
    port = n;
    return true;
}

bool is_integer(const redisReply* r, long long max) noexcept
{
    return r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= max;
}

// [host, port, node id, ...]
bool parse_node(const redisReply* node, std::string_view& host, unsigned& port) noexcept
{
    if (node == nullptr || node->type != REDIS_REPLY_ARRAY || node->elements < 2
        || node->element[0]->type != REDIS_REPLY_STRING || !is_integer(node->element[1], 65535)
        || node->element[1]->integer == 0) {
        return false;
    }
    host = {node->element[0]->str, node->element[0]->len};
    if (host == "?") {
        host = {};  // the node does not know its own address: the one we asked
    }
    port = static_cast<unsigned>(node->element[1]->integer);
    return true;
}

bool parse_range(const redisReply* r, SlotRange& range) noexcept
{
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 3
        || !is_integer(r->element[0], cluster_slot_count - 1) || !is_integer(r->element[1], cluster_slot_count - 1)
        || r->element[0]->integer > r->element[1]->integer) {
        return false;
    }
    range.first = static_cast<unsigned>(r->element[0]->integer);
    range.last = static_cast<unsigned>(r->element[1]->integer);
    return parse_node(r->element[2], range.host, range.port);
}

}  // namespace

unsigned key_slot(std::string_view key) noexcept
{
    // Only the part between the first '{' and the next '}' is hashed, if it
    // is not empty.
    size_t open = key.find('{');
    if (open != std::string_view::npos) {
        size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) {
            key = key.substr(open + 1, close - open - 1);
        }
    }
    return crc16(key) & (cluster_slot_count - 1);
}

std::optional<Redirect> parse_redirect(std::string_view error) noexcept
{
    Redirect r{};
    if (error.substr(0, 6) == "MOVED ") {
        error.remove_prefix(6);
    } else if (error.substr(0, 4) == "ASK ") {
        r.ask = true;
        error.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    size_t space = error.find(' ');
    if (space == std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view slot = error.substr(0, space);
    std::string_view address = error.substr(space + 1);
    unsigned n = 0;
    if (slot.empty() || slot.size() > 5) {
        return std::nullopt;
    }
    for (char c : slot) {
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (n >= cluster_slot_count) {
        return std::nullopt;
    }
    r.slot = n;
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos || !parse_port(address.substr(colon + 1), r.port)) {
        return std::nullopt;
    }
    r.host = address.substr(0, colon);
    if (r.host.size() >= 2 && r.host.front() == '[' && r.host.back() == ']') {
        r.host = r.host.substr(1, r.host.size() - 2);
    }
    return r;
}

bool parse_cluster_slots(const redisReply* reply, void (*each)(void* data, const SlotRange& range), void* data) noexcept
{
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) {
        return false;
    }
    SlotRange range{};
    for (size_t i = 0; i < reply->elements; i++) {
        if (!parse_range(reply->element[i], range)) {
            return false;
        }
    }
    for (size_t i = 0; i < reply->elements; i++) {
        parse_range(reply->element[i], range);
        each(data, range);
    }
    return true;
}

}  // namespace idem::redis
