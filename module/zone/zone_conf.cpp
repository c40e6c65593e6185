// zone/zone_conf.cpp — idempotency_zone and idempotency_store: the zone's
// name and size, and which store a location uses.

#include "zone_conf.hpp"

#include "../conf_util.hpp"
#include "zone_store.hpp"

namespace idem::zone {

char* set_zone(ngx_conf_t* cf, ngx_command_t*, void*)
{
    ngx_str_t arg = static_cast<ngx_str_t*>(cf->args->elts)[1];
    ngx_str_t name;
    u_char* colon = nullptr;
    if (!parameter(arg, "zone=", name) || (colon = ngx_strlchr(name.data, name.data + name.len, ':')) == nullptr
        || colon == name.data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\" in \"idempotency_zone\" (expected zone=NAME:SIZE)",
                           &arg);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_str_t size_arg{static_cast<size_t>(name.data + name.len - colon - 1), colon + 1};
    name.len = static_cast<size_t>(colon - name.data);
    ssize_t size = ngx_parse_size(&size_arg);
    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid size \"%V\" of zone \"%V\" in \"idempotency_zone\"", &size_arg,
                           &name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (size < static_cast<ssize_t>(8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "zone \"%V\" of \"idempotency_zone\" is too small: at least %uzk", &name,
                           8 * ngx_pagesize / 1024);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_shm_zone_t* shm = add_zone(cf, name, static_cast<size_t>(size));
    if (shm == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (shm->data != nullptr) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate zone \"%V\" in \"idempotency_zone\"", &name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    return make_store(cf, shm) ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

char* set_store(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->zone != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    ngx_str_t arg = static_cast<ngx_str_t*>(cf->args->elts)[1];
    ngx_str_t name;
    if (view(arg) == "redis") {
        lcf->zone = nullptr;
        return NGX_CONF_OK;
    }
    if (!parameter(arg, "zone=", name)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"%V\" in \"idempotency_store\" (expected zone=NAME or redis)",
                           &arg);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    // Size 0: a reference; idempotency_zone (anywhere in the http block) defines it.
    lcf->zone = add_zone(cf, name, 0);
    return lcf->zone != nullptr ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

}  // namespace idem::zone
