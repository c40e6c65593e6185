// conf_util.hpp — what the directive handlers share: NAME=VALUE
// parameters, header names (and NAME | off), and the small files
// directives name (passwords, keys).
#pragma once

#include <string_view>

#include "ngx.hpp"

namespace idem {

// `arg` is `name` (which ends in '=') and then a value that is not empty:
// true, with `value` set to it.
inline bool parameter(const ngx_str_t& arg, std::string_view name, ngx_str_t& value) noexcept
{
    if (arg.len <= name.size() || view(arg).substr(0, name.size()) != name) {
        return false;
    }
    value = ngx_str_t{arg.len - name.size(), arg.data + name.size()};
    return true;
}

// A directive's header name: letters, digits, '-' and '_'. False, said
// (naming the directive), when it is not one.
bool check_header_name(ngx_conf_t* cf, const ngx_str_t& directive, const ngx_str_t& name);

// A directive's `NAME | off`, into the ngx_str_t at cmd->offset of the
// location's configuration: off leaves it empty (but set, so that an
// enclosing block's NAME is not inherited).
char* set_header_name_or_off(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

// Reads a small file named by a directive, once, at configuration time;
// relative paths start at the configuration directory, as for
// ssl_certificate. False, logged, when it cannot be opened; `n` is what
// read() gave (equal to `size` when the file is larger than expected).
bool read_config_file(ngx_conf_t* cf, const char* directive, const char* what, ngx_str_t& path, u_char* buf,
                      size_t size, ssize_t& n);

struct LocConf;
// idempotency_piece_size within its bounds, and what a response kept in
// pieces needs of the rest (pieces.hpp): at most max_piece_count pieces of
// idempotency_max_response_size, keys that can share a Cluster slot.
// False, said (naming the directive), when it does not hold.
bool check_pieces(ngx_conf_t* cf, const LocConf* conf);

// idempotency_compress_dictionary FILE ...: the first file's dictionary
// compresses new records, all of them open records (compression.hpp).
char* set_compress_dictionary(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);
struct Dictionaries;
Dictionaries location_dictionaries(const LocConf& conf) noexcept;

// idempotency_encrypt_key FILE ...: the first file's key seals, all open.
char* set_encrypt_key(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

char* set_release_statuses(ngx_conf_t* cf, ngx_command_t* cmd, void* conf);

}  // namespace idem
