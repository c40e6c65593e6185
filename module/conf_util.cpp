// conf_util.cpp — see conf_util.hpp.

#include "conf_util.hpp"

#include "conf.hpp"
#include "compression.hpp"
#include "disposition.hpp"
#include "pieces.hpp"
#include "seal.hpp"

namespace idem {

bool read_config_file(ngx_conf_t* cf, const char* directive, const char* what, ngx_str_t& path, u_char* buf,
                      size_t size, ssize_t& n)
{
    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return false;
    }
    ngx_fd_t fd = ngx_open_file(path.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "\"%s\": cannot open %s\"%V\"", directive, what, &path);
        return false;
    }
    n = ngx_read_fd(fd, buf, size);
    ngx_close_file(fd);
    return true;
}

bool check_header_name(ngx_conf_t* cf, const ngx_str_t& directive, const ngx_str_t& name)
{
    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "empty header name in \"%V\"", &directive);
        return false;
    }
    for (size_t i = 0; i < name.len; i++) {
        u_char ch = name.data[i];
        if (!(ch == '-' || ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'))) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid header name \"%V\" in \"%V\"", &name, &directive);
            return false;
        }
    }
    return true;
}

char* set_header_name_or_off(ngx_conf_t* cf, ngx_command_t* cmd, void* conf)
{
    auto* field = reinterpret_cast<ngx_str_t*>(static_cast<char*>(conf) + cmd->offset);
    if (field->data != nullptr) {
        return const_cast<char*>("is duplicate");
    }
    ngx_str_t name = static_cast<ngx_str_t*>(cf->args->elts)[1];
    if (view(name) == "off") {
        *field = {0, reinterpret_cast<u_char*>(const_cast<char*>(""))};
        return NGX_CONF_OK;
    }
    if (!check_header_name(cf, cmd->name, name)) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    *field = name;
    return NGX_CONF_OK;
}

bool check_pieces(ngx_conf_t* cf, const LocConf* conf)
{
    if (conf->piece_size < min_piece_size || conf->piece_size > max_piece_size) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_piece_size\" must be between 64k and 64m");
        return false;
    }
    std::size_t body = piece_body_size(conf->piece_size);
    if (conf->max_response_size <= conf->piece_size) {
        return true;  // never in pieces
    }
    if ((conf->max_response_size + body - 1) / body > max_piece_count) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency_max_response_size\" %uzk would need more than %uD pieces of "
                           "\"idempotency_piece_size\" %uzk: raise the piece size",
                           conf->max_response_size / 1024, max_piece_count, conf->piece_size / 1024);
        return false;
    }
    if (!pieces_keyable(view(conf->key_prefix))) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency_key_prefix\" \"%V\" has a '}' outside a hash tag: the pieces of a large "
                           "response could not share its key's Redis Cluster slot (use a tag such as \"{idem}:\", or "
                           "set \"idempotency_max_response_size\" no larger than \"idempotency_piece_size\")",
                           &conf->key_prefix);
        return false;
    }
    return true;
}

namespace {

constexpr std::size_t max_dictionary_size = 1024 * 1024;

void free_dictionary(void* data)
{
    delete static_cast<ZstdDictionary*>(data);
}

}  // namespace

char* set_compress_dictionary(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->dictionaries != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    lcf->dictionaries = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ZstdDictionary*));
    auto* buf = static_cast<u_char*>(ngx_alloc(max_dictionary_size + 1, cf->log));
    if (lcf->dictionaries == nullptr || buf == nullptr) {
        ngx_free(buf);
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        ngx_str_t path = args[i];
        ssize_t n = 0;
        if (!read_config_file(cf, "idempotency_compress_dictionary", "", path, buf, max_dictionary_size + 1, n)) {
            ngx_free(buf);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        ZstdDictionary* d = n > 0 && static_cast<size_t>(n) <= max_dictionary_size
                                ? ZstdDictionary::create({reinterpret_cast<char*>(buf), static_cast<size_t>(n)},
                                                         record_compression_level)
                                : nullptr;
        ngx_pool_cleanup_t* cln = d != nullptr ? ngx_pool_cleanup_add(cf->pool, 0) : nullptr;
        auto* slot = static_cast<ZstdDictionary**>(cln != nullptr ? ngx_array_push(lcf->dictionaries) : nullptr);
        if (slot == nullptr) {
            delete d;
            ngx_free(buf);
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"idempotency_compress_dictionary\": \"%V\" is not a zstd dictionary of at most 1m "
                               "(one made by \"zstd --train\", which has an id)", &path);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        cln->handler = free_dictionary;
        cln->data = d;
        *slot = d;
        for (ngx_uint_t j = 0; j + 1 < lcf->dictionaries->nelts; j++) {
            if (static_cast<ZstdDictionary**>(lcf->dictionaries->elts)[j]->id() == d->id()) {
                ngx_free(buf);
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"idempotency_compress_dictionary\": \"%V\" has the id %uD of a dictionary "
                                   "named before it", &path, d->id());
                return static_cast<char*>(NGX_CONF_ERROR);
            }
        }
    }
    ngx_free(buf);
    return NGX_CONF_OK;
}

Dictionaries location_dictionaries(const LocConf& conf) noexcept
{
    const ngx_array_t* a = conf.dictionaries;
    return a != nullptr ? Dictionaries{static_cast<ZstdDictionary* const*>(a->elts), a->nelts} : Dictionaries{};
}

char* set_encrypt_key(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->seal_keys != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    lcf->seal_keys = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(SecretKey));
    if (lcf->seal_keys == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        ngx_str_t path = args[i];
        u_char buf[129];
        ssize_t n = 0;
        if (!read_config_file(cf, "idempotency_encrypt_key", "", path, buf, sizeof(buf), n)) {
            return static_cast<char*>(NGX_CONF_ERROR);
        }
        auto* key = static_cast<SecretKey*>(ngx_array_push(lcf->seal_keys));
        bool ok = n >= 0 && n < static_cast<ssize_t>(sizeof(buf)) && key != nullptr
                  && parse_secret_key({reinterpret_cast<char*>(buf), static_cast<size_t>(n)}, *key);
        ngx_explicit_memzero(buf, sizeof(buf));
        if (!ok) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"idempotency_encrypt_key\": \"%V\" must hold a 32-byte key (32 raw bytes or 64 hex digits)",
                               &path);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    return NGX_CONF_OK;
}

// idempotency_release_statuses CODE ... | off: the 4xx answers that say the
// request was not executed, released instead of stored.
char* set_release_statuses(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->release_statuses != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    auto* statuses = static_cast<ReleaseStatuses*>(ngx_palloc(cf->pool, sizeof(ReleaseStatuses)));
    if (statuses == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    *statuses = ReleaseStatuses{};
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    if (cf->args->nelts == 2 && view(args[1]) == "off") {
        lcf->release_statuses = statuses;
        return NGX_CONF_OK;
    }
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (!statuses->add(parse_release_status(view(args[i])))) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid status \"%V\" in \"idempotency_release_statuses\": it takes statuses from 400 "
                               "to 499, or \"off\" alone (a 5xx is never stored unless idempotency_store_errors is on)",
                               &args[i]);
            return static_cast<char*>(NGX_CONF_ERROR);
        }
    }
    lcf->release_statuses = statuses;
    return NGX_CONF_OK;
}

}  // namespace idem
