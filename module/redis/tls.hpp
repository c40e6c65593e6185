// redis/tls.hpp — TLS on one Redis connection with nginx's own SSL layer:
// the handshake on the event loop, then Redis's chain and name checked
// before AUTH leaves. nginx swaps c->send/c->recv, so the connection's I/O
// is unchanged. The session is kept for the next connection. Owns no socket.
#pragma once

#include <string_view>

#include "../ngx.hpp"

namespace idem::redis {

struct TlsContext;

// ctx nullptr: plain TCP. `host`: what the certificate must name without
// idempotency_redis_ssl_name (empty: the IP address connected to).
struct TlsTarget {
    const TlsContext* ctx = nullptr;
    std::string_view host;
};

// Once per process: the slot that ties an SSL object to its TlsClient.
bool register_tls_client() noexcept;

class TlsClient {
public:
    explicit TlsClient(TlsTarget target) noexcept;
    ~TlsClient();
    TlsClient(const TlsClient&) = delete;
    TlsClient& operator=(const TlsClient&) = delete;

    bool enabled() const noexcept { return ctx_ != nullptr; }

    // NGX_OK when done, NGX_AGAIN when `done(c)` will be called (c's handlers
    // are replaced meanwhile), NGX_ERROR.
    ngx_int_t start(ngx_connection_t* c, const ngx_addr_t& addr, ngx_connection_handler_pt done,
                    ngx_log_t* log) noexcept;

    // nullptr when Redis may be talked to, else why not. Logs the handshake at info.
    const char* check(ngx_connection_t* c, const ngx_str_t& redis, ngx_log_t* log) noexcept;

    // From a fatal alert either side sent; nullptr when none tells.
    const char* failure() noexcept;
    const char* handshake_failure() noexcept;  // never nullptr

    // No close_notify exchange (nothing to wait for); the session stays resumable.
    void close(ngx_connection_t* c) noexcept;

private:
    static void on_info(const SSL* ssl, int where, int ret);
    static void on_new_session(ngx_connection_t* c);

    const TlsContext* ctx_;
    ngx_ssl_session_t* session_ = nullptr;
    ngx_log_t quiet_log_{};   // nginx's own SSL messages: at most alerts
    const char* setup_error_ = nullptr;
    int alert_ = 0;           // the last fatal alert, as the info callback gives it (0: none)
    bool alert_received_ = false;
    bool is_ip_ = false;
    size_t host_len_ = 0;
    char host_[256] = {};
    char reason_[320] = {};
};

}  // namespace idem::redis
