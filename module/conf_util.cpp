// conf_util.cpp — see conf_util.hpp.

#include "conf_util.hpp"

#include "conf.hpp"
#include "pieces.hpp"

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
    if (conf->max_response_size <= conf->piece_size) {
        return true;  // never in pieces
    }
    if ((conf->max_response_size + conf->piece_size - 1) / conf->piece_size > max_piece_count) {
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

}  // namespace idem
