// admin_key.cpp — see admin_key.hpp.

#include "admin_key.hpp"

#include "conf.hpp"
#include "key.hpp"
#include "key_space.hpp"

namespace idem {
namespace {

// The first server_name of the server nginx would choose for Host `name` on
// this address (exact, wildcard, regex, case-insensitive, trailing dot
// ignored); a name no server here has is taken for another's first
// server_name, lower-cased as nginx keeps it.
ngx_str_t server_identity(ngx_http_request_t* r, const ngx_str_t& name)
{
    ngx_str_t host{name.len, static_cast<u_char*>(ngx_pnalloc(r->pool, name.len ? name.len : 1))};
    if (host.data == nullptr) {
        return name;
    }
    ngx_strlow(host.data, name.data, name.len);
    if (host.len > 1 && host.data[host.len - 1] == '.') {
        host.len--;
    }
    ngx_http_virtual_names_t* names = r->http_connection != nullptr && r->http_connection->addr_conf != nullptr
                                          ? r->http_connection->addr_conf->virtual_names
                                          : nullptr;
    if (names == nullptr) {
        return host;
    }
    auto* cscf = static_cast<ngx_http_core_srv_conf_t*>(
        ngx_hash_find_combined(&names->names, ngx_hash_key(host.data, host.len), host.data, host.len));
#if (NGX_PCRE)
    for (ngx_uint_t i = 0; cscf == nullptr && host.len != 0 && i < names->nregex; i++) {
        if (ngx_regex_exec(names->regex[i].regex->regex, &host, nullptr, 0) >= 0) {
            cscf = names->regex[i].server;
        }
    }
#endif
    return cscf != nullptr ? cscf->server_name : host;
}

}  // namespace

bool query_arg(ngx_http_request_t* r, const char* name, ngx_str_t& out)
{
    ngx_str_t raw;
    if (ngx_http_arg(r, reinterpret_cast<u_char*>(const_cast<char*>(name)), ngx_strlen(name), &raw) != NGX_OK) {
        return false;
    }
    out.data = static_cast<u_char*>(ngx_pnalloc(r->pool, raw.len + 1));
    if (out.data == nullptr) {
        out.len = 0;
        return true;  // read as empty: the caller's checks answer
    }
    u_char* dst = out.data;
    u_char* src = raw.data;
    ngx_unescape_uri(&dst, &src, raw.len, 0);
    out.len = static_cast<size_t>(dst - out.data);
    return true;
}

bool is_yes(const ngx_str_t& s)
{
    return (s.len == 1 && s.data[0] == '1') || (s.len == 4 && ngx_strncasecmp(s.data, (u_char*)"true", 4) == 0)
           || (s.len == 3 && ngx_strncasecmp(s.data, (u_char*)"yes", 3) == 0);
}

bool key_from_hash(ngx_http_request_t* r, const LocConf* conf, const ngx_str_t& hash, ngx_str_t& key)
{
    if (hash.len != key_hash_hex_length) {
        return false;
    }
    key.data = static_cast<u_char*>(ngx_pnalloc(r->pool, conf->key_prefix.len + key_hash_hex_length));
    if (key.data == nullptr) {
        return false;
    }
    u_char* p = ngx_cpymem(key.data, conf->key_prefix.data, conf->key_prefix.len);
    for (size_t i = 0; i < hash.len; i++) {
        u_char c = ngx_tolower(hash.data[i]);
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
        *p++ = c;
    }
    key.len = static_cast<size_t>(p - key.data);
    return true;
}

bool key_from_header(ngx_http_request_t* r, const LocConf* conf, std::string_view client_key, ngx_str_t& key)
{
    ngx_str_t scope = ngx_null_string, server;
    query_arg(r, "scope", scope);
    ngx_str_t space = conf->key_space;
    if (query_arg(r, "server", server) && !key_space_of(r->pool, server_identity(r, server), space)) {
        return false;
    }
    return store_key(r->pool, conf->key_prefix, space, scope, client_key, key);
}

}  // namespace idem
