// zone/zone_tree.hpp — a zone's records: one slab allocation each, in two
// rbtrees (by key, by expiry), and the primitives of every zone operation.
// Must not touch the zone's mutex (the store takes it around them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../ngx.hpp"

namespace idem::zone {

struct Node {
    ngx_rbtree_node_t by_key;     // key: CRC32 of the store key, ties broken by the key
    ngx_rbtree_node_t by_expiry;  // key: expiry, ngx_current_msec (one monotonic clock for all workers)
    std::uint32_t key_len;
    std::uint32_t value_len;
    std::uint32_t capacity;       // room for the value
    char data[1];                 // key, then value
};

struct Shared {
    ngx_rbtree_t by_key;
    ngx_rbtree_node_t key_sentinel;
    ngx_rbtree_t by_expiry;
    ngx_rbtree_node_t expiry_sentinel;
    std::uint64_t last_fence;  // the last fence a claim drew (docs/design.md#the-fence)
};

inline Node* node_by_key(ngx_rbtree_node_t* n)
{
    return reinterpret_cast<Node*>(n);
}

inline Node* node_by_expiry(ngx_rbtree_node_t* n)
{
    return reinterpret_cast<Node*>(reinterpret_cast<char*>(n) - offsetof(Node, by_expiry));
}

inline std::string_view key_of(const Node* n)
{
    return {n->data, n->key_len};
}

inline std::string_view value_of(const Node* n)
{
    return {n->data + n->key_len, n->value_len};
}

void insert_by_key(ngx_rbtree_node_t* temp, ngx_rbtree_node_t* node, ngx_rbtree_node_t* sentinel);

// Once nginx has mapped the zone. All but hash_of run under its mutex.
class Tree {
public:
    static ngx_rbtree_key_t hash_of(std::string_view key) noexcept;

    Node* find_live(std::string_view key, ngx_rbtree_key_t hash, ngx_msec_t now) noexcept;
    size_t expire(size_t max, ngx_msec_t now) noexcept;
    Node* allocate(size_t key_len, size_t value_len, ngx_msec_t now) noexcept;
    void set_value(Node* n, std::string_view value) noexcept;
    void expire_at(Node* n, ngx_msec_t expires) noexcept;
    Node* insert(std::string_view key, ngx_rbtree_key_t hash, std::string_view value, ngx_msec_t now,
                 ngx_msec_t expires) noexcept;
    void remove(Node* n) noexcept;

protected:
    Shared* sh_ = nullptr;
    ngx_slab_pool_t* pool_ = nullptr;
};

}  // namespace idem::zone
