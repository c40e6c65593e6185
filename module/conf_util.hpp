// conf_util.hpp — what the directive handlers share.
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

// `name` ends in '='; the value must not be empty.
inline bool parameter(const ngx_str_t& arg, std::string_view name, ngx_str_t& value) noexcept
{
    if (arg.len <= name.size() || view(arg).substr(0, name.size()) != name) {
        return false;
    }
    value = ngx_str_t{arg.len - name.size(), arg.data + name.size()};
    return true;
}

// Letters, digits, '-' and '_'. False, logged naming the directive.
bool check_header_name(ngx_conf_t* cf, const ngx_str_t& directive, const ngx_str_t& name);

// Into the ngx_str_t at cmd->offset: off leaves it empty but set, so an
// enclosing block's NAME is not inherited.
char* set_header_name_or_off(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// Once, at configuration; relative to the configuration directory, as
// ssl_certificate. False, logged, when it cannot be opened; `n` is what
// read() gave (`size` when the file is larger than expected).
bool read_config_file(ngx_conf_t* cf, const char* directive, const char* what, ngx_str_t& path, u_char* buf,
                      size_t size, ssize_t& n);

struct LocConf;
// At most max_piece_count pieces of idempotency_max_response_size, keys that
// can share a Cluster slot. False, logged naming the directive.
bool check_pieces(ngx_conf_t* cf, const LocConf* conf);

// The first file's dictionary compresses new records; all of them open.
char* set_compress_dictionary(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
struct Dictionaries;
Dictionaries location_dictionaries(const LocConf& conf) noexcept;

// The first file's key seals; all open.
char* set_encrypt_key(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

char* set_release_statuses(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem
