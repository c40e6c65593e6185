// redis/redis_conf.cpp — the Redis directives and one RedisServer per
// distinct deployment. No message quotes what may be a secret: a parameter
// is named, never its value, and nothing before an address's '@' is shown.

#include "redis_conf.hpp"

#include <cstdlib>

#include "../conf_util.hpp"

namespace idem::redis {
namespace {

// NAME= without its value (a mistyped password=, ...), or the whole word.
ngx_str_t parameter_name(const ngx_str_t& arg)
{
    u_char* eq = ngx_strlchr(arg.data, arg.data + arg.len, '=');
    return eq == nullptr ? arg : ngx_str_t{static_cast<size_t>(eq + 1 - arg.data), arg.data};
}

// What follows the last '@'; `hidden` says something was left out.
ngx_str_t shown_address(const ngx_str_t& address, const char*& hidden)
{
    hidden = "";
    for (size_t i = address.len; i-- > 0;) {
        if (address.data[i] == '@') {
            hidden = "(credentials not shown)@";
            return {address.len - i - 1, address.data + i + 1};
        }
    }
    return address;
}

// Anything else given to password_env= may be the password itself.
bool looks_like_variable_name(const ngx_str_t& name)
{
    for (size_t i = 0; i < name.len; i++) {
        u_char c = name.data[i];
        if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9'))) {
            return false;
        }
    }
    return name.len > 0;
}

// The file's first line, trailing whitespace dropped.
bool read_password_file(ngx_conf_t* cf, ngx_str_t path, ngx_str_t& password)
{
    u_char buf[1025];
    ssize_t n = 0;
    if (!read_config_file(cf, "idempotency_redis", "password_file ", path, buf, sizeof(buf), n)) {
        return false;
    }
    size_t len = n > 0 ? static_cast<size_t>(n) : 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\n' || buf[i] == '\r') {
            len = i;
        }
    }
    while (len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t')) {
        len--;
    }
    if (n < 0 || n == static_cast<ssize_t>(sizeof(buf)) || len == 0) {
        ngx_explicit_memzero(buf, sizeof(buf));
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency_redis\": password_file \"%V\" must hold a password of 1 to 1024 bytes", &path);
        return false;
    }
    password.data = static_cast<u_char*>(ngx_pnalloc(cf->pool, len));
    if (password.data != nullptr) {
        ngx_memcpy(password.data, buf, len);
        password.len = len;
    }
    ngx_explicit_memzero(buf, sizeof(buf));
    return password.data != nullptr;
}

// With `prefix` before each; true when `a` is one, `error` set when bad.
bool parse_password(ngx_conf_t* cf, const ngx_str_t& a, std::string_view prefix, ngx_str_t& password, bool& error)
{
    ngx_str_t rest;
    if (!parameter(a, prefix, rest)) {
        return false;
    }
    ngx_str_t value;
    if (parameter(rest, "password=", value)) {
        password = value;
    } else if (parameter(rest, "password_file=", value)) {
        error = !read_password_file(cf, value, password);
    } else if (parameter(rest, "password_env=", value)) {
        ngx_str_t name = value;
        char env_name[256];
        const char* value = nullptr;
        if (name.len < sizeof(env_name)) {
            ngx_memcpy(env_name, name.data, name.len);
            env_name[name.len] = '\0';
            value = getenv(env_name);
        }
        if (value == nullptr || *value == '\0') {
            if (!looks_like_variable_name(name)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%*spassword_env= takes the name of an environment "
                                   "variable (letters, digits and '_'; the value given is not shown)",
                                   prefix.size(), prefix.data());
                error = true;
                return true;
            }
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "the environment variable \"%V\" of %*spassword_env= is not set",
                               &name, prefix.size(), prefix.data());
            error = true;
            return true;
        }
        password.len = ngx_strlen(value);
        password.data = static_cast<u_char*>(ngx_pnalloc(cf->pool, password.len));
        if (password.data == nullptr) {
            error = true;
            return true;
        }
        ngx_memcpy(password.data, value, password.len);
    } else {
        return false;
    }
    return true;
}

bool same_auth(const RedisAuth& a, const RedisAuth& b)
{
    return a.db == b.db && view(a.password) == view(b.password) && view(a.username) == view(b.username);
}

}  // namespace

bool same_deployment(const RedisServer& a, const RedisServer& b)
{
    if (a.kind != b.kind || a.nurls != b.nurls || a.ssl != b.ssl || view(a.master_name) != view(b.master_name)
        || !same_auth(a.auth, b.auth) || !same_auth(a.sentinel_auth, b.sentinel_auth)) {
        return false;
    }
    for (ngx_uint_t i = 0; i < a.nurls; i++) {
        if (view(a.urls[i].url) != view(b.urls[i].url)) {
            return false;
        }
    }
    return true;
}

RedisServer* add_server(ngx_conf_t* cf, MainConf& mcf, const RedisServer& server)
{
    auto* stored = static_cast<RedisServer*>(ngx_pcalloc(cf->pool, sizeof(RedisServer)));
    auto** slot = static_cast<RedisServer**>(ngx_array_push(&mcf.servers));
    if (stored == nullptr || slot == nullptr) {
        return nullptr;
    }
    *stored = server;
    stored->index = mcf.servers.nelts - 1;
    *slot = stored;
    return stored;
}

// The command's offset is its RedisKind.
char* set_redis(ngx_conf_t* cf, ngx_command_t* cmd, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->server != nullptr) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\": a Redis store is already set for this level (by "
                           "idempotency_redis, idempotency_redis_cluster or idempotency_redis_sentinel)", &cmd->name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_idempotency_module));
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    const char* directive = reinterpret_cast<const char*>(cmd->name.data);

    RedisServer server{};
    server.kind = static_cast<RedisKind>(cmd->offset);
    ngx_uint_t first = 1;
    if (server.kind == RedisKind::sentinel) {
        server.master_name = args[1];
        first = 2;
        if (server.master_name.len == 0 || ngx_strlchr(args[1].data, args[1].data + args[1].len, '=') != nullptr) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\" needs the master's name first, then the sentinels' "
                               "addresses", directive);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    ngx_uint_t last = first;
    while (last < cf->args->nelts && ngx_strlchr(args[last].data, args[last].data + args[last].len, '=') == nullptr
           && view(args[last]) != "ssl") {
        last++;
    }
    if (last == first || (server.kind == RedisKind::single && last - first > 1)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, server.kind == RedisKind::single
                           ? "\"%s\" takes one address" : "\"%s\" needs at least one address", directive);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    server.nurls = last - first;
    if (server.nurls > (server.kind == RedisKind::sentinel ? 16 : 64)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\" takes at most %s addresses", directive,
                           server.kind == RedisKind::sentinel ? "16" : "64");
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    server.urls = static_cast<ngx_url_t*>(ngx_pcalloc(cf->pool, server.nurls * sizeof(ngx_url_t)));
    if (server.urls == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    size_t name_len = server.kind == RedisKind::sentinel ? server.master_name.len + sizeof("\"\" via sentinel ") : 0;
    for (ngx_uint_t i = 0; i < server.nurls; i++) {
        ngx_url_t& url = server.urls[i];
        url.url = args[first + i];
        url.default_port = server.kind == RedisKind::sentinel ? 26379 : 6379;
        const char* hidden = "";
        ngx_str_t shown = shown_address(url.url, hidden);
        if (ngx_parse_url(cf->pool, &url) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid Redis address \"%s%V\" in \"%s\"%s%s%s", hidden, &shown,
                               directive, url.err ? ": " : "", url.err ? url.err : "",
                               *hidden != '\0' ? " (credentials go in username= and password=)" : "");
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        if (url.naddrs == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "Redis address \"%s%V\" in \"%s\" has no addresses", hidden,
                               &shown, directive);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        if (server.kind == RedisKind::cluster && url.family == AF_UNIX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\": cluster nodes are reached over TCP, not \"%s%V\"",
                               directive, hidden, &shown);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        name_len += url.url.len + 1;
    }

    for (ngx_uint_t i = last; i < cf->args->nelts; i++) {
        const ngx_str_t& a = args[i];
        bool error = false;
        ngx_str_t v;
        if (parameter(a, "db=", v)) {
            server.auth.db = ngx_atoi(v.data, v.len);
            if (server.auth.db == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%V\" in \"%s\": db must be a number", &a, directive);
                return static_cast<char*>(NGX_CONF_ERROR);
            }
            if (server.kind == RedisKind::cluster && server.auth.db != 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\": Redis Cluster has only database 0", directive);
                return static_cast<char*>(NGX_CONF_ERROR);
            }
        } else if (view(a) == "ssl") {
            server.ssl = true;
        } else if (parse_password(cf, a, "", server.auth.password, error)) {
            if (error) {
                return static_cast<char*>(NGX_CONF_ERROR);
            }
        } else if (parameter(a, "username=", v)) {
            server.auth.username = v;
        } else if (server.kind == RedisKind::sentinel && parse_password(cf, a, "sentinel_", server.sentinel_auth.password, error)) {
            if (error) {
                return static_cast<char*>(NGX_CONF_ERROR);
            }
        } else if (server.kind == RedisKind::sentinel && parameter(a, "sentinel_username=", v)) {
            server.sentinel_auth.username = v;
        } else {
            ngx_str_t name = parameter_name(a);
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" in \"%s\" (expected %sssl, db=, username=, password=, "
                               "password_file= or password_env=%s)", &name, directive,
                               server.kind == RedisKind::sentinel ? "an address, " : "",
                               server.kind == RedisKind::sentinel ? ", or the same with sentinel_ before them" : "");
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    for (ngx_uint_t i = 0; server.ssl && i < server.nurls; i++) {
        if (server.urls[i].family == AF_UNIX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\": \"ssl\" is for TCP addresses, not \"%V\"", directive,
                               &server.urls[i].url);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    for (const RedisAuth* auth : {&server.auth, &server.sentinel_auth}) {
        if (auth->username.len && !auth->password.len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\": %susername= needs a password (password=, password_file= "
                               "or password_env=)", directive, auth == &server.auth ? "" : "sentinel_");
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }

    // Each worker keeps one store (and its connections) per deployment.
    auto** known = static_cast<RedisServer**>(mcf->servers.elts);
    for (ngx_uint_t i = 0; i < mcf->servers.nelts; i++) {
        if (same_deployment(*known[i], server)) {
            lcf->server = known[i];
            return NGX_CONF_OK;
        }
    }

    if (server.kind == RedisKind::single) {
        server.name = args[1];
    } else {
        name_len += sizeof("cluster ");
        server.name.data = static_cast<u_char*>(ngx_pnalloc(cf->pool, name_len));
        if (server.name.data == nullptr) {
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        u_char* p = server.kind == RedisKind::cluster
                        ? ngx_cpymem(server.name.data, "cluster ", 8)
                        : ngx_sprintf(server.name.data, "\"%V\" via sentinel ", &server.master_name);
        for (ngx_uint_t i = 0; i < server.nurls; i++) {
            p = ngx_sprintf(p, i ? ",%V" : "%V", &server.urls[i].url);
        }
        server.name.len = static_cast<size_t>(p - server.name.data);
    }

    lcf->server = add_server(cf, *mcf, server);
    return lcf->server != nullptr ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

}  // namespace idem::redis
