// redis/tls.hpp — TLS on one Redis connection, with nginx's own SSL layer
// (ngx_ssl_*, as the proxy module's upstream TLS): started on the connected
// socket, the handshake driven by the event loop, then the certificate of
// Redis checked — its chain and its name, a DNS name or an IP address —
// before the first command (AUTH) leaves. After the handshake nginx has
// swapped c->send and c->recv for its SSL ones, so the connection's I/O is
// unchanged. The session is kept for the next connection to the same
// target. Owns no socket; knows nothing of commands.
#pragma once

#include <string_view>

#include "../ngx.hpp"

namespace idem::redis {

struct TlsContext;

// Where a connection's TLS comes from: its context (nullptr: plain TCP) and
// the host its certificate must name when idempotency_redis_ssl_name is not
// set (empty: the IP address connected to).
struct TlsTarget {
    const TlsContext* ctx = nullptr;
    std::string_view host;
};

// Once per process, at configuration: the slot that ties an SSL object to
// its TlsClient.
bool register_tls_client() noexcept;

class TlsClient {
public:
    explicit TlsClient(TlsTarget target) noexcept;
    ~TlsClient();
    TlsClient(const TlsClient&) = delete;
    TlsClient& operator=(const TlsClient&) = delete;

    bool enabled() const noexcept { return ctx_ != nullptr; }

    // Makes `c` (connected to `addr`, with a pool) a TLS client and starts the
    // handshake: NGX_OK when done, NGX_AGAIN when `done(c)` will be called
    // (the caller's handlers of c are replaced meanwhile), NGX_ERROR.
    ngx_int_t start(ngx_connection_t* c, const ngx_addr_t& addr, ngx_connection_handler_pt done,
                    ngx_log_t* log) noexcept;

    // After the handshake: nullptr when Redis may be talked to, else why
    // not (its chain or name). Logs the handshake at info.
    const char* check(ngx_connection_t* c, const ngx_str_t& redis, ngx_log_t* log) noexcept;

    // Why the handshake failed, or why the connection broke (a fatal alert
    // either side sent); nullptr when no alert tells.
    const char* failure() noexcept;
    const char* handshake_failure() noexcept;  // never nullptr

    // Before the connection is closed: no close_notify exchange (nothing to
    // wait for), and the kept session stays resumable.
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
