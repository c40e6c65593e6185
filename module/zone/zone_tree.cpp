// zone/zone_tree.cpp — see zone_tree.hpp.

#include "zone_tree.hpp"

#include <cstring>

#include "zone_rules.hpp"

namespace idem::zone {

void insert_by_key(ngx_rbtree_node_t* temp, ngx_rbtree_node_t* node, ngx_rbtree_node_t* sentinel)
{
    ngx_rbtree_node_t** p;
    for (;;) {
        if (node->key != temp->key) {
            p = node->key < temp->key ? &temp->left : &temp->right;
        } else {
            p = key_of(node_by_key(node)) < key_of(node_by_key(temp)) ? &temp->left : &temp->right;
        }
        if (*p == sentinel) {
            break;
        }
        temp = *p;
    }
    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

namespace {

constexpr size_t reclaim_batch = 64;       // expired records freed per round when memory runs out
constexpr size_t max_reclaim_rounds = 16;  // a bound on the work done under the mutex

u_char* bytes_of(std::string_view s) noexcept
{
    return reinterpret_cast<u_char*>(const_cast<char*>(s.data()));
}

}  // namespace

// CRC32, computed before the mutex is taken (hashing the key is most of a
// lookup's instructions). ngx_crc32_long equals ngx_crc32_short, so a zone
// kept across a reload stays ordered.
ngx_rbtree_key_t Tree::hash_of(std::string_view key) noexcept
{
    return static_cast<ngx_rbtree_key_t>(ngx_crc32_long(bytes_of(key), key.size()));
}

// An expired record is freed: it is as good as absent.
Node* Tree::find_live(std::string_view key, ngx_rbtree_key_t hash, ngx_msec_t now) noexcept
{
    ngx_rbtree_node_t* n = sh_->by_key.root;
    ngx_rbtree_node_t* sentinel = sh_->by_key.sentinel;
    while (n != sentinel) {
        if (hash != n->key) {
            n = hash < n->key ? n->left : n->right;
            continue;
        }
        Node* node = node_by_key(n);
        int rc = key.compare(key_of(node));
        if (rc == 0) {
            if (expired(node->by_expiry.key, now)) {
                remove(node);
                return nullptr;
            }
            return node;
        }
        n = rc < 0 ? n->left : n->right;
    }
    return nullptr;
}

// Oldest expiry first; returns how many.
size_t Tree::expire(size_t max, ngx_msec_t now) noexcept
{
    size_t freed = 0;
    ngx_rbtree_node_t* sentinel = sh_->by_expiry.sentinel;
    while (freed < max && sh_->by_expiry.root != sentinel) {
        ngx_rbtree_node_t* first = ngx_rbtree_min(sh_->by_expiry.root, sentinel);
        if (!expired(first->key, now)) {
            break;
        }
        remove(node_by_expiry(first));
        freed++;
    }
    return freed;
}

// When full, a bounded number of expired records is reclaimed first, never
// a live one: nullptr then.
Node* Tree::allocate(size_t key_len, size_t value_len, ngx_msec_t now) noexcept
{
    size_t size = offsetof(Node, data) + key_len + value_len;
    void* p = ngx_slab_alloc_locked(pool_, size);
    for (size_t round = 0; p == nullptr && round < max_reclaim_rounds; round++) {
        if (expire(reclaim_batch, now) == 0) {
            break;
        }
        p = ngx_slab_alloc_locked(pool_, size);
    }
    auto* n = static_cast<Node*>(p);
    if (n != nullptr) {
        n->key_len = static_cast<std::uint32_t>(key_len);
        n->capacity = static_cast<std::uint32_t>(value_len);
    }
    return n;
}

void Tree::set_value(Node* n, std::string_view value) noexcept
{
    std::memcpy(n->data + n->key_len, value.data(), value.size());
    n->value_len = static_cast<std::uint32_t>(value.size());
}

void Tree::expire_at(Node* n, ngx_msec_t expires) noexcept
{
    ngx_rbtree_delete(&sh_->by_expiry, &n->by_expiry);
    n->by_expiry.key = expires;
    ngx_rbtree_insert(&sh_->by_expiry, &n->by_expiry);
}

Node* Tree::insert(std::string_view key, ngx_rbtree_key_t hash, std::string_view value, ngx_msec_t now,
                   ngx_msec_t expires) noexcept
{
    Node* n = allocate(key.size(), value.size(), now);
    if (n == nullptr) {
        return nullptr;
    }
    std::memcpy(n->data, key.data(), key.size());
    set_value(n, value);
    n->by_key.key = hash;
    n->by_expiry.key = expires;
    ngx_rbtree_insert(&sh_->by_key, &n->by_key);
    ngx_rbtree_insert(&sh_->by_expiry, &n->by_expiry);
    return n;
}

void Tree::remove(Node* n) noexcept
{
    ngx_rbtree_delete(&sh_->by_key, &n->by_key);
    ngx_rbtree_delete(&sh_->by_expiry, &n->by_expiry);
    ngx_slab_free_locked(pool_, n);
}

}  // namespace idem::zone
