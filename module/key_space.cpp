// key_space.cpp — see key_space.hpp.

#include "key_space.hpp"

#include "key.hpp"

namespace idem {
namespace {

// The first server_name, the same on every gateway of a fleet. Blocks with
// the same first name (http and https) share one key space; so do those
// without a name, hence nginx -t's warning when two of them protect requests.
ngx_str_t server_identity(ngx_conf_t* cf)
{
    auto* cscf = static_cast<ngx_http_core_srv_conf_t*>(ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module));
    return cscf->server_name;
}

void warn_unnamed_servers(ngx_conf_t* cf, const LocConf* conf)
{
    auto* cscf = static_cast<ngx_http_core_srv_conf_t*>(ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module));
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_idempotency_module));
    if (!conf->enable || cscf->server_name.len != 0 || mcf->warned_unnamed) {
        return;
    }
    if (mcf->unnamed_server == nullptr) {
        mcf->unnamed_server = cscf;
        return;
    }
    if (mcf->unnamed_server != cscf) {
        mcf->warned_unnamed = true;
        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "\"idempotency on\" in server blocks without \"server_name\": their keys share one key space; "
                      "give each server block a \"server_name\" for keys of its own");
    }
}

// Composed with the scope, the space cannot be confused with part of it.
bool set_key_space(ngx_conf_t* cf, LocConf* conf)
{
    return key_space_of(cf->pool, server_identity(cf), conf->key_space);
}

// Callers of the virtual server share its key space. Said once per location.
void warn_without_scope(ngx_conf_t* cf, const LocConf* conf)
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    if (!conf->enable || conf->scope != nullptr || clcf->name.len == 0 || clcf->noname) {
        return;
    }
    ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                  "\"idempotency on\" in location \"%V\" without \"idempotency_scope\": every caller of this server "
                  "shares one key space, so a caller who sends another's key gets that caller's response, Set-Cookie included; set "
                  "\"idempotency_scope\" to a stable caller identity ($remote_user, $ssl_client_s_dn, a variable "
                  "set by auth_request_set), or to \"\" to share the space on purpose",
                  &clcf->name);
}

}  // namespace

bool key_space_of(ngx_pool_t* pool, const ngx_str_t& name, ngx_str_t& space)
{
    space.data = static_cast<u_char*>(ngx_pnalloc(pool, NGX_SIZE_T_LEN + 1 + name.len));
    if (space.data == nullptr) {
        return false;
    }
    space.len = static_cast<size_t>(ngx_sprintf(space.data, "%uz:%V", name.len, &name) - space.data);
    return true;
}

bool store_key(ngx_pool_t* pool, const ngx_str_t& prefix, const ngx_str_t& space, const ngx_str_t& scope,
               std::string_view key, ngx_str_t& out)
{
    auto* spaced = static_cast<u_char*>(ngx_pnalloc(pool, space.len + scope.len + 1));
    out.data = static_cast<u_char*>(ngx_pnalloc(pool, prefix.len + key_hash_hex_length));
    if (spaced == nullptr || out.data == nullptr) {
        return false;
    }
    u_char* end = ngx_cpymem(spaced, space.data, space.len);
    if (scope.len != 0) {  // an unset scope has no data at all
        end = ngx_cpymem(end, scope.data, scope.len);
    }
    out.len = derive_redis_key(view(prefix), {reinterpret_cast<char*>(spaced), static_cast<size_t>(end - spaced)}, key,
                               reinterpret_cast<char*>(out.data));
    return out.len != 0;
}

bool merge_key_space(ngx_conf_t* cf, LocConf* conf)
{
    if (!set_key_space(cf, conf)) {
        return false;
    }
    warn_without_scope(cf, conf);
    warn_unnamed_servers(cf, conf);
    return true;
}

}  // namespace idem
