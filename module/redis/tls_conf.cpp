// redis/tls_conf.cpp — see tls_conf.hpp.

#include "tls_conf.hpp"

#include "../conf_util.hpp"
#include "redis_conf.hpp"
#include "tls.hpp"

namespace idem::redis {
namespace {

// Redis services put their certificates one or two CAs below a root.
constexpr ngx_int_t verify_depth = 3;

bool same_settings(const RedisTlsConf& a, const RedisTlsConf& b)
{
    return a.verify == b.verify && a.protocols == b.protocols && view(a.name) == view(b.name)
           && view(a.trusted_certificate) == view(b.trusted_certificate) && view(a.certificate) == view(b.certificate)
           && view(a.certificate_key) == view(b.certificate_key) && view(a.ciphers) == view(b.ciphers);
}

// Checked here because nginx's own SSL messages name the OpenSSL call, not
// the directive.
bool readable(ngx_conf_t* cf, const char* directive, ngx_str_t path)
{
    u_char byte;
    ssize_t n = 0;
    if (!read_config_file(cf, directive, "", path, &byte, 1, n)) {
        return false;
    }
    if (n < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "\"%s\": cannot read \"%V\"", directive, &path);
        return false;
    }
    return true;
}

bool check_files(ngx_conf_t* cf, const RedisTlsConf& conf)
{
    if (conf.verify && conf.trusted_certificate.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "the \"ssl\" parameter of \"idempotency_redis\" (or _redis_cluster, _redis_sentinel) needs "
                           "\"idempotency_redis_ssl_trusted_certificate\" while \"idempotency_redis_ssl_verify\" is on "
                           "(the default)");
        return false;
    }
    if (conf.certificate.len && !conf.certificate_key.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_redis_ssl_certificate\" \"%V\" needs "
                           "\"idempotency_redis_ssl_certificate_key\"", &conf.certificate);
        return false;
    }
    if (conf.certificate_key.len && !conf.certificate.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_redis_ssl_certificate_key\" \"%V\" needs "
                           "\"idempotency_redis_ssl_certificate\"", &conf.certificate_key);
        return false;
    }
    return (!conf.trusted_certificate.len
            || readable(cf, "idempotency_redis_ssl_trusted_certificate", conf.trusted_certificate))
           && (!conf.certificate.len || readable(cf, "idempotency_redis_ssl_certificate", conf.certificate))
           && (!conf.certificate_key.len
               || readable(cf, "idempotency_redis_ssl_certificate_key", conf.certificate_key));
}

// Freed with the configuration's pool.
TlsContext* create_context(ngx_conf_t* cf, const RedisTlsConf& conf)
{
    if (!check_files(cf, conf)) {
        return nullptr;
    }
    auto* ctx = static_cast<TlsContext*>(ngx_pcalloc(cf->pool, sizeof(TlsContext)));
    if (ctx == nullptr || !register_tls_client()) {
        return nullptr;
    }
    ctx->conf = conf;
    ctx->ssl.log = cf->log;
    if (ngx_ssl_create(&ctx->ssl, conf.protocols, nullptr) != NGX_OK) {
        return nullptr;
    }
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == nullptr) {
        ngx_ssl_cleanup_ctx(&ctx->ssl);
        return nullptr;
    }
    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = &ctx->ssl;

    // A connection's queue of commands may grow (and move) between the
    // writes of one record.
    SSL_CTX_set_mode(ctx->ssl.ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

    // nginx's calls take the paths as they complete them: copies, so that
    // `conf` keeps them as written (compared by same_settings).
    ngx_str_t ciphers = conf.ciphers;
    if (ngx_ssl_ciphers(cf, &ctx->ssl, &ciphers, 0) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"idempotency_redis_ssl_ciphers\" \"%V\"", &conf.ciphers);
        return nullptr;
    }
    if (conf.certificate.len) {
        ngx_str_t cert = conf.certificate;
        ngx_str_t key = conf.certificate_key;
        if (ngx_ssl_certificate(cf, &ctx->ssl, &cert, &key, nullptr) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_redis_ssl_certificate\" \"%V\" with "
                               "\"idempotency_redis_ssl_certificate_key\" \"%V\" cannot be used", &conf.certificate,
                               &conf.certificate_key);
            return nullptr;
        }
    }
    if (conf.verify) {
        ngx_str_t trusted = conf.trusted_certificate;
        if (ngx_ssl_trusted_certificate(cf, &ctx->ssl, &trusted, verify_depth) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_redis_ssl_trusted_certificate\" \"%V\" cannot "
                               "be used", &conf.trusted_certificate);
            return nullptr;
        }
    }
    if (ngx_ssl_client_session_cache(cf, &ctx->ssl, 1) != NGX_OK) {
        return nullptr;
    }
    return ctx;
}

}  // namespace

ngx_conf_bitmask_t tls_protocols[] = {
    {ngx_string("TLSv1"), NGX_SSL_TLSv1},
    {ngx_string("TLSv1.1"), NGX_SSL_TLSv1_1},
    {ngx_string("TLSv1.2"), NGX_SSL_TLSv1_2},
    {ngx_string("TLSv1.3"), NGX_SSL_TLSv1_3},
    {ngx_null_string, 0},
};

void init_tls_conf(RedisTlsConf& conf) noexcept
{
    conf = RedisTlsConf{};  // strings unset (null)
    conf.verify = NGX_CONF_UNSET;
    conf.protocols = 0;     // ngx_conf_set_bitmask_slot: 0 is unset
}

char* merge_tls_conf(ngx_conf_t* cf, RedisTlsConf& conf, const RedisTlsConf& prev, RedisServer*& server,
                     ngx_flag_t enabled)
{
    ngx_conf_merge_value(conf.verify, prev.verify, 1);
    ngx_conf_merge_str_value(conf.name, prev.name, "");
    ngx_conf_merge_str_value(conf.trusted_certificate, prev.trusted_certificate, "");
    ngx_conf_merge_str_value(conf.certificate, prev.certificate, "");
    ngx_conf_merge_str_value(conf.certificate_key, prev.certificate_key, "");
    ngx_conf_merge_bitmask_value(conf.protocols, prev.protocols,
                                 NGX_CONF_BITMASK_SET | NGX_SSL_TLSv1_2 | NGX_SSL_TLSv1_3);
    ngx_conf_merge_str_value(conf.ciphers, prev.ciphers, "DEFAULT");

    if (!enabled || server == nullptr || !server->ssl) {
        return NGX_CONF_OK;
    }
    if (server->tls != nullptr && same_settings(server->tls->conf, conf)) {
        return NGX_CONF_OK;
    }
    auto* mcf = static_cast<MainConf*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_idempotency_module));
    auto** known = static_cast<RedisServer**>(mcf->servers.elts);
    for (ngx_uint_t i = 0; i < mcf->servers.nelts; i++) {
        if (known[i]->tls != nullptr && same_settings(known[i]->tls->conf, conf) && same_deployment(*known[i], *server)) {
            server = known[i];
            return NGX_CONF_OK;
        }
    }
    if (!conf.verify && (server->auth.password.len != 0 || server->sentinel_auth.password.len != 0)) {
        // logged once per deployment and settings: here the context is made
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "\"idempotency_redis_ssl_verify off\": the password for Redis %V is sent to whichever server "
                           "answers, its certificate unchecked; set \"idempotency_redis_ssl_trusted_certificate\" and "
                           "leave verification on", &server->name);
    }
    TlsContext* ctx = create_context(cf, conf);
    if (ctx == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (server->tls == nullptr) {
        server->tls = ctx;
        return NGX_CONF_OK;
    }
    // The same Redis, named where other TLS settings are in force.
    RedisServer other = *server;
    other.tls = ctx;
    server = add_server(cf, *mcf, other);
    return server != nullptr ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

}  // namespace idem::redis
