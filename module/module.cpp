// module.cpp — ngx_http_idempotency_module: the directive table, the
// configuration's create and merge, $idempotency_status, and the wiring of
// the pre-content handler, the replay's and the capture's filters (two filter
// modules, placed apart in nginx's filter chain: see config) and the
// per-worker Redis clients.
// The request itself is handled in access.cpp (the pre-content handler),
// claim.cpp, wait.cpp, capture.cpp, client_gone.cpp and replay.cpp.

#include "access.hpp"
#include "admin.hpp"
#include "capture.hpp"
#include "request_ctx.hpp"
#include "conf_util.hpp"
#include "disposition.hpp"
#include "feed.hpp"
#include "fence.hpp"
#include "fingerprint_conf.hpp"
#include "live_board.hpp"
#include "key_space.hpp"
#include "metrics.hpp"
#include "redis/redis_conf.hpp"
#include "redis/tls_conf.hpp"
#include "redis/worker_stores.hpp"
#include "test_hooks.hpp"
#include "zone/zone_conf.hpp"

namespace idem {
namespace {

char* set_methods(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
char* set_header(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

using Setter = char* (*)(ngx_conf_t*, ngx_command_t*, void*);

// A directive of http, server and location blocks, kept in LocConf: at
// `offset` by one of nginx's slot setters, or by a setter of the module's
// own (which reads `offset` as it likes).
ngx_command_t directive(ngx_str_t name, ngx_uint_t args, Setter set, ngx_uint_t offset = 0, void* post = nullptr)
{
    return {name, NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | args, set, NGX_HTTP_LOC_CONF_OFFSET,
            offset, post};
}

ngx_command_t commands[] = {
    directive(ngx_string("idempotency"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, enable)),
    directive(ngx_string("idempotency_redis"), NGX_CONF_1MORE, redis::set_redis, static_cast<ngx_uint_t>(RedisKind::single)),
    directive(ngx_string("idempotency_redis_cluster"), NGX_CONF_1MORE, redis::set_redis, static_cast<ngx_uint_t>(RedisKind::cluster)),
    directive(ngx_string("idempotency_redis_sentinel"), NGX_CONF_2MORE, redis::set_redis, static_cast<ngx_uint_t>(RedisKind::sentinel)),
    {ngx_string("idempotency_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, zone::set_zone, NGX_HTTP_MAIN_CONF_OFFSET, 0, nullptr},
    {ngx_string("idempotency_redis_oom_buffer"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_size_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(MainConf, oom_buffer), nullptr},
    directive(ngx_string("idempotency_store"), NGX_CONF_TAKE1, zone::set_store),
    directive(ngx_string("idempotency_redis_timeout"), NGX_CONF_TAKE1, ngx_conf_set_msec_slot, offsetof(LocConf, redis_timeout)),
    directive(ngx_string("idempotency_redis_ssl_verify"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, redis_tls.verify)),
    directive(ngx_string("idempotency_redis_ssl_name"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, redis_tls.name)),
    directive(ngx_string("idempotency_redis_ssl_trusted_certificate"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, redis_tls.trusted_certificate)),
    directive(ngx_string("idempotency_redis_ssl_certificate"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, redis_tls.certificate)),
    directive(ngx_string("idempotency_redis_ssl_certificate_key"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, redis_tls.certificate_key)),
    directive(ngx_string("idempotency_redis_ssl_protocols"), NGX_CONF_1MORE, ngx_conf_set_bitmask_slot, offsetof(LocConf, redis_tls.protocols), redis::tls_protocols),
    directive(ngx_string("idempotency_redis_ssl_ciphers"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, redis_tls.ciphers)),
    directive(ngx_string("idempotency_methods"), NGX_CONF_1MORE, set_methods),
    directive(ngx_string("idempotency_header"), NGX_CONF_TAKE1, set_header),
    directive(ngx_string("idempotency_key"), NGX_CONF_TAKE1, ngx_http_set_complex_value_slot, offsetof(LocConf, key)),
    directive(ngx_string("idempotency_fingerprint"), NGX_CONF_1MORE, set_fingerprint),
    directive(ngx_string("idempotency_required"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, required)),
    directive(ngx_string("idempotency_ttl"), NGX_CONF_TAKE1, ngx_conf_set_msec_slot, offsetof(LocConf, ttl)),
    directive(ngx_string("idempotency_lock_ttl"), NGX_CONF_TAKE1, ngx_conf_set_msec_slot, offsetof(LocConf, lock_ttl)),
    directive(ngx_string("idempotency_wait"), NGX_CONF_TAKE1, ngx_conf_set_msec_slot, offsetof(LocConf, wait)),
    directive(ngx_string("idempotency_scope"), NGX_CONF_TAKE1, ngx_http_set_complex_value_slot, offsetof(LocConf, scope)),
    directive(ngx_string("idempotency_key_prefix"), NGX_CONF_TAKE1, ngx_conf_set_str_slot, offsetof(LocConf, key_prefix)),
    directive(ngx_string("idempotency_max_response_size"), NGX_CONF_TAKE1, ngx_conf_set_size_slot, offsetof(LocConf, max_response_size)),
    directive(ngx_string("idempotency_piece_size"), NGX_CONF_TAKE1, ngx_conf_set_size_slot, offsetof(LocConf, piece_size)),
    directive(ngx_string("idempotency_store_errors"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, store_errors)),
    directive(ngx_string("idempotency_compress"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, compress)),
    directive(ngx_string("idempotency_compress_dictionary"), NGX_CONF_1MORE, set_compress_dictionary),
    directive(ngx_string("idempotency_release_statuses"), NGX_CONF_1MORE, set_release_statuses),
    directive(ngx_string("idempotency_upstream_control"), NGX_CONF_TAKE1, set_header_name_or_off, offsetof(LocConf, upstream_control)),
    directive(ngx_string("idempotency_replayed_header"), NGX_CONF_TAKE1, set_header_name_or_off, offsetof(LocConf, replayed_header)),
    directive(ngx_string("idempotency_fail_open"), NGX_CONF_FLAG, ngx_conf_set_flag_slot, offsetof(LocConf, fail_open)),
    directive(ngx_string("idempotency_encrypt_key"), NGX_CONF_1MORE, set_encrypt_key),
    {ngx_string("idempotency_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_metrics_handler, NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
    {ngx_string("idempotency_admin"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_admin_handler, NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
#ifdef IDEM_TEST_HOOKS
    {ngx_string("idempotency_test_store_raw"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, set_test_store_raw, NGX_HTTP_LOC_CONF_OFFSET, 0, nullptr},
#endif
    ngx_null_command,
};

// ---------------------------------------------------------------- directives

struct MethodName {
    std::string_view name;
    ngx_uint_t mask;
};

constexpr MethodName method_names[] = {
    {"GET", NGX_HTTP_GET},         {"HEAD", NGX_HTTP_HEAD},         {"POST", NGX_HTTP_POST},
    {"PUT", NGX_HTTP_PUT},         {"DELETE", NGX_HTTP_DELETE},     {"PATCH", NGX_HTTP_PATCH},
    {"OPTIONS", NGX_HTTP_OPTIONS}, {"MKCOL", NGX_HTTP_MKCOL},       {"COPY", NGX_HTTP_COPY},
    {"MOVE", NGX_HTTP_MOVE},       {"PROPFIND", NGX_HTTP_PROPFIND}, {"PROPPATCH", NGX_HTTP_PROPPATCH},
    {"LOCK", NGX_HTTP_LOCK},       {"UNLOCK", NGX_HTTP_UNLOCK},     {"TRACE", NGX_HTTP_TRACE},
};

char* set_methods(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->methods != NGX_CONF_UNSET_UINT) {
        return const_cast<char*>("is duplicate");
    }
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    ngx_uint_t mask = 0;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        ngx_uint_t found = 0;
        for (const auto& m : method_names) {
            if (m.name == view(args[i])) {
                found = m.mask;
            }
        }
        if (found == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "unknown method \"%V\" in \"idempotency_methods\"", &args[i]);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        mask |= found;
    }
    lcf->methods = mask;
    return NGX_CONF_OK;
}

char* set_header(ngx_conf_t* cf, ngx_command_t* cmd, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->header.data != nullptr) {
        return const_cast<char*>("is duplicate");
    }
    ngx_str_t name = static_cast<ngx_str_t*>(cf->args->elts)[1];
    if (!check_header_name(cf, cmd->name, name)) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    lcf->header = name;
    return NGX_CONF_OK;
}

// ---------------------------------------------------------- configuration

void* create_main_conf(ngx_conf_t* cf)
{
    auto* mcf = static_cast<MainConf*>(ngx_pcalloc(cf->pool, sizeof(MainConf)));
    if (mcf == nullptr || ngx_array_init(&mcf->servers, cf->pool, 2, sizeof(RedisServer*)) != NGX_OK) {
        return nullptr;
    }
    mcf->oom_buffer = NGX_CONF_UNSET_SIZE;
    return mcf;
}

char* init_main_conf(ngx_conf_t*, void* conf)
{
    auto* mcf = static_cast<MainConf*>(conf);
    ngx_conf_init_size_value(mcf->oom_buffer, 16 * 1024 * 1024);
    return NGX_CONF_OK;
}

void* create_loc_conf(ngx_conf_t* cf)
{
    auto* conf = static_cast<LocConf*>(ngx_pcalloc(cf->pool, sizeof(LocConf)));
    if (conf == nullptr) {
        return nullptr;
    }
    // pcalloc left unset (null or empty): server, header, header_lowcase,
    // key_space, key_prefix, upstream_control and replayed_header, set in
    // merge
    conf->enable = NGX_CONF_UNSET;
    conf->zone = static_cast<ngx_shm_zone_t*>(NGX_CONF_UNSET_PTR);
    conf->redis_timeout = NGX_CONF_UNSET_MSEC;
    redis::init_tls_conf(conf->redis_tls);
    conf->methods = NGX_CONF_UNSET_UINT;
    conf->required = NGX_CONF_UNSET;
    conf->ttl = NGX_CONF_UNSET_MSEC;
    conf->lock_ttl = NGX_CONF_UNSET_MSEC;
    conf->wait = NGX_CONF_UNSET_MSEC;
    conf->scope = static_cast<ngx_http_complex_value_t*>(NGX_CONF_UNSET_PTR);
    conf->key = static_cast<ngx_http_complex_value_t*>(NGX_CONF_UNSET_PTR);
    conf->fingerprint = static_cast<const FingerprintConf*>(NGX_CONF_UNSET_PTR);
    conf->seal_keys = static_cast<ngx_array_t*>(NGX_CONF_UNSET_PTR);
    conf->max_response_size = NGX_CONF_UNSET_SIZE;
    conf->piece_size = NGX_CONF_UNSET_SIZE;
    conf->store_errors = NGX_CONF_UNSET;
    conf->compress = NGX_CONF_UNSET;
    conf->dictionaries = static_cast<ngx_array_t*>(NGX_CONF_UNSET_PTR);
    conf->release_statuses = static_cast<const ReleaseStatuses*>(NGX_CONF_UNSET_PTR);
    conf->fail_open = NGX_CONF_UNSET;
    return conf;
}

char* merge_loc_conf(ngx_conf_t* cf, void* parent, void* child)
{
    auto* prev = static_cast<LocConf*>(parent);
    auto* conf = static_cast<LocConf*>(child);

    bool enabled_here = conf->enable != NGX_CONF_UNSET;
    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    if (!merge_admin(cf, conf, enabled_here)) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (conf->server == nullptr) {
        conf->server = prev->server;
    }
    if (redis::merge_tls_conf(cf, conf->redis_tls, prev->redis_tls, conf->server, conf->enable) != NGX_CONF_OK) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_conf_merge_ptr_value(conf->zone, prev->zone, nullptr);
    ngx_conf_merge_msec_value(conf->redis_timeout, prev->redis_timeout, 1000);
    ngx_conf_merge_uint_value(conf->methods, prev->methods, NGX_HTTP_POST | NGX_HTTP_PATCH);
    ngx_conf_merge_str_value(conf->header, prev->header, "Idempotency-Key");
    conf->header_lowcase.len = conf->header.len;
    conf->header_lowcase.data = static_cast<u_char*>(ngx_pnalloc(cf->pool, conf->header.len));
    if (conf->header_lowcase.data == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_strlow(conf->header_lowcase.data, conf->header.data, conf->header.len);
    ngx_conf_merge_ptr_value(conf->key, prev->key, nullptr);
    ngx_conf_merge_ptr_value(conf->fingerprint, prev->fingerprint, nullptr);
    ngx_conf_merge_value(conf->required, prev->required, 0);
    ngx_conf_merge_msec_value(conf->ttl, prev->ttl, 24 * 60 * 60 * 1000);
    ngx_conf_merge_msec_value(conf->lock_ttl, prev->lock_ttl, 30 * 1000);
    ngx_conf_merge_msec_value(conf->wait, prev->wait, 0);
    ngx_conf_merge_ptr_value(conf->scope, prev->scope, nullptr);
    if (!merge_key_space(cf, conf)) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    ngx_conf_merge_str_value(conf->key_prefix, prev->key_prefix, "idem:");
    ngx_conf_merge_size_value(conf->max_response_size, prev->max_response_size, 1024 * 1024);
    ngx_conf_merge_size_value(conf->piece_size, prev->piece_size, 1024 * 1024);
    ngx_conf_merge_value(conf->store_errors, prev->store_errors, 0);
    ngx_conf_merge_value(conf->compress, prev->compress, 1);
    ngx_conf_merge_ptr_value(conf->dictionaries, prev->dictionaries, nullptr);
    static constexpr ReleaseStatuses not_executed = ReleaseStatuses::of({401, 403, 408, 425, 429});
    ngx_conf_merge_ptr_value(conf->release_statuses, prev->release_statuses, &not_executed);
    ngx_conf_merge_value(conf->fail_open, prev->fail_open, 0);
    ngx_conf_merge_str_value(conf->upstream_control, prev->upstream_control, "");
    ngx_conf_merge_str_value(conf->replayed_header, prev->replayed_header, "Idempotent-Replayed");
    ngx_conf_merge_ptr_value(conf->seal_keys, prev->seal_keys, nullptr);
    conf->fence = fence_named(cf);

    if (conf->zone != nullptr && !zone::defined(conf->zone)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency_store\": unknown zone \"%V\" (define it with \"idempotency_zone zone=%V:SIZE\" "
                           "in the http block)", &conf->zone->shm.name, &conf->zone->shm.name);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if ((conf->enable || conf->admin) && conf->server == nullptr && conf->zone == nullptr) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%s needs a store: \"idempotency_redis\" (or _redis_cluster, _redis_sentinel), "
                           "or \"idempotency_store zone=NAME\" "
                           "with \"idempotency_zone\", in this location or an enclosing block",
                           conf->enable ? "\"idempotency on\"" : "\"idempotency_admin\"");
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (conf->enable && conf->key == nullptr && ngx_strlchr(conf->header.data, conf->header.data + conf->header.len, '_')) {
        auto* cscf = static_cast<ngx_http_core_srv_conf_t*>(ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module));
        if (!cscf->underscores_in_headers && cscf->ignore_invalid_headers) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"idempotency_header\" \"%V\" has an underscore: nginx drops such request headers "
                               "unless \"underscores_in_headers on\" (or \"ignore_invalid_headers off\") is set "
                               "for the server, so no request would ever carry the key", &conf->header);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    if (conf->ttl == 0 || conf->lock_ttl == 0 || conf->redis_timeout == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency_ttl\", \"idempotency_lock_ttl\" and \"idempotency_redis_timeout\" must be greater than 0");
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (conf->max_response_size > 0xffffffffu) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_max_response_size\" must be at most 4095m");
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    if (conf->key_prefix.len > 256) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_key_prefix\" must be at most 256 bytes");
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    return check_pieces(cf, conf) ? NGX_CONF_OK : static_cast<char*>(NGX_CONF_ERROR);
}

// ---------------------------------------------------------------- variable

ngx_int_t status_variable(ngx_http_request_t* r, ngx_http_variable_value_t* v, uintptr_t)
{
    RequestCtx* ctx = find_ctx(r);
    std::string_view name = ctx ? outcome_info(ctx->outcome).name : std::string_view{};
    v->data = reinterpret_cast<u_char*>(const_cast<char*>(name.data()));
    v->len = name.size();
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

ngx_int_t add_variables(ngx_conf_t* cf)
{
    static ngx_str_t name = ngx_string("idempotency_status");
    ngx_http_variable_t* var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == nullptr) {
        return NGX_ERROR;
    }
    var->get_handler = status_variable;
    return fence_add_variables(cf);
}

// ------------------------------------------------------------------ wiring

ngx_int_t postconfiguration(ngx_conf_t* cf)
{
    auto* cmcf = static_cast<ngx_http_core_main_conf_t*>(ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    // Not the access phase: its handlers run in reverse order of registration
    // (a dynamic module's would run before allow/deny and auth_*), and
    // `satisfy any` leaves the phase at the first handler that allows.
    auto* h = static_cast<ngx_http_handler_pt*>(ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers));
    if (h == nullptr) {
        return NGX_ERROR;
    }
    *h = precontent_handler;
    metrics_add_section(zone::write_usage);
    if (!zone::keeps_records(cf) || metrics_zone_add(cf) != NGX_OK || live_board_add(cf) != NGX_OK) {
        return NGX_ERROR;
    }
    return capture_upper_init(cf);
}

ngx_int_t init_process(ngx_cycle_t* cycle)
{
    metrics_attach(cycle);
    live_board_attach(cycle);
    auto* mcf = static_cast<MainConf*>(ngx_http_cycle_get_module_main_conf(cycle, ngx_http_idempotency_module));
    if (mcf == nullptr) {
        return NGX_OK;
    }
    return redis::start_worker_stores(cycle, *mcf);
}

void exit_process(ngx_cycle_t* cycle)
{
    feeds_exit();  // before the stores: a feed abandons what it has in flight
    redis::stop_worker_stores(cycle);
}

ngx_http_module_t module_ctx = {
    add_variables,      // preconfiguration
    postconfiguration,  // postconfiguration
    create_main_conf,   // create main configuration
    init_main_conf,     // init main configuration
    nullptr,            // create server configuration
    nullptr,            // merge server configuration
    create_loc_conf,    // create location configuration
    merge_loc_conf,     // merge location configuration
};

// The second filter module of the .so: the capture's filters, placed right
// below nginx's postpone filter (config); no directives of its own.
ngx_http_module_t capture_module_ctx = {
    nullptr,       // preconfiguration
    capture_init,  // postconfiguration
    nullptr,       // create main configuration
    nullptr,       // init main configuration
    nullptr,       // create server configuration
    nullptr,       // merge server configuration
    nullptr,       // create location configuration
    nullptr,       // merge location configuration
};

}  // namespace

}  // namespace idem

extern "C" {

ngx_module_t ngx_http_idempotency_capture_module = {
    NGX_MODULE_V1,
    &idem::capture_module_ctx,  // module context
    nullptr,                    // module directives
    NGX_HTTP_MODULE,            // module type
    nullptr,                    // init master
    nullptr,                    // init module
    nullptr,                    // init process
    nullptr,                    // init thread
    nullptr,                    // exit thread
    nullptr,                    // exit process
    nullptr,                    // exit master
    NGX_MODULE_V1_PADDING,
};

__attribute__((visibility("default"))) ngx_module_t ngx_http_idempotency_module = {
    NGX_MODULE_V1,
    &idem::module_ctx,      // module context
    idem::commands,         // module directives
    NGX_HTTP_MODULE,        // module type
    nullptr,                // init master
    nullptr,                // init module
    idem::init_process,     // init process
    nullptr,                // init thread
    nullptr,                // exit thread
    idem::exit_process,     // exit process
    nullptr,                // exit master
    NGX_MODULE_V1_PADDING,
};
}
