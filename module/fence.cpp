// fence.cpp — see fence.hpp.

#include "fence.hpp"

#include "conf.hpp"
#include "key.hpp"
#include "request_ctx.hpp"

namespace idem {
namespace {

ngx_str_t fence_name = ngx_string("idempotency_fence");
ngx_str_t key_hash_name = ngx_string("idempotency_key_hash");

void set_value(ngx_http_variable_value_t* v, u_char* data, size_t len)
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
}

// Drawn when the claim was granted; empty for every other request (a
// replay, a conflict, a request the module passed through).
ngx_int_t fence_variable(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t)
{
    RequestCtx* ctx = find_ctx(r);
    if (ctx == nullptr || ctx->claim.fence == 0) {
        v->not_found = 1;
        return NGX_OK;
    }
    auto* p = static_cast<u_char*>(ngx_pnalloc(r->pool, NGX_INT64_LEN));
    if (p == nullptr) {
        return NGX_ERROR;
    }
    set_value(v, p, static_cast<size_t>(ngx_sprintf(p, "%uL", static_cast<uint64_t>(ctx->claim.fence)) - p));
    return NGX_OK;
}

// The store key without its prefix: known once the key was accepted.
ngx_int_t key_hash_variable(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t)
{
    RequestCtx* ctx = find_ctx(r);
    if (ctx == nullptr || ctx->claim.key.len < key_hash_hex_length) {
        v->not_found = 1;
        return NGX_OK;
    }
    set_value(v, ctx->claim.key.data + ctx->claim.key.len - key_hash_hex_length, key_hash_hex_length);
    return NGX_OK;
}

}  // namespace

ngx_int_t fence_add_variables(ngx_conf_t* cf) noexcept
{
    ngx_http_variable_t* fence = ngx_http_add_variable(cf, &fence_name, NGX_HTTP_VAR_NOCACHEABLE);
    ngx_http_variable_t* hash = ngx_http_add_variable(cf, &key_hash_name, NGX_HTTP_VAR_NOCACHEABLE);
    if (fence == nullptr || hash == nullptr) {
        return NGX_ERROR;
    }
    fence->get_handler = fence_variable;
    hash->get_handler = key_hash_variable;
    return NGX_OK;
}

bool fence_named(ngx_conf_t* cf) noexcept
{
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_idempotency_module));
    if (mcf->fence_looked_up) {
        return mcf->fence_named;
    }
    mcf->fence_looked_up = true;
    auto* cmcf = static_cast<ngx_http_core_main_conf_t*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    auto* v = static_cast<ngx_http_variable_t*>(cmcf->variables.elts);
    for (ngx_uint_t i = 0; i < cmcf->variables.nelts; i++) {
        if (v[i].name.len == fence_name.len && ngx_strncmp(v[i].name.data, fence_name.data, fence_name.len) == 0) {
            mcf->fence_named = true;
        }
    }
    return mcf->fence_named;
}

}  // namespace idem
