// conf_util.cpp — see conf_util.hpp.

#include "conf_util.hpp"

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

}  // namespace idem
