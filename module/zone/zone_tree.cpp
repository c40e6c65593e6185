// zone/zone_tree.cpp — see zone_tree.hpp.

#include "zone_tree.hpp"

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

}  // namespace idem::zone
