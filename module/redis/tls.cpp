// redis/tls.cpp — see tls.hpp.

#include "tls.hpp"

#include <arpa/inet.h>

#include "tls_conf.hpp"
#include "tls_reason.hpp"

namespace idem::redis {
namespace {

int client_index = -1;  // SSL ex_data slot: the TlsClient of an SSL object

TlsClient* client_of(const SSL* ssl) noexcept
{
    return static_cast<TlsClient*>(SSL_get_ex_data(ssl, client_index));
}

bool is_ip_address(const char* host) noexcept
{
    unsigned char addr[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

}  // namespace

bool register_tls_client() noexcept
{
    if (client_index == -1) {
        client_index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    }
    return client_index != -1;
}

TlsClient::TlsClient(TlsTarget target) noexcept : ctx_(target.ctx)
{
    if (ctx_ == nullptr) {
        return;
    }
    std::string_view host = ctx_->conf.name.len ? view(ctx_->conf.name) : target.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);  // an IPv6 address as URLs write it
    }
    if (!host.empty() && host.size() < sizeof(host_)) {  // empty: named at connect time
        host_len_ = host.size();
        ngx_memcpy(host_, host.data(), host_len_);
        host_[host_len_] = '\0';
        is_ip_ = is_ip_address(host_);
    }
}

TlsClient::~TlsClient()
{
    if (session_ != nullptr) {
        ngx_ssl_free_session(session_);
    }
}

ngx_int_t TlsClient::start(ngx_connection_t* c, const ngx_addr_t& addr, ngx_connection_handler_pt done,
                           ngx_log_t* log) noexcept
{
    // nginx logs every failed handshake, and every reconnection would repeat
    // it: its SSL layer gets a log passing only alerts (and the debug trace);
    // the connection logs the reason once.
    quiet_log_ = *log;
    if (quiet_log_.log_level <= NGX_LOG_DEBUG) {
        quiet_log_.log_level = ngx_min(quiet_log_.log_level, static_cast<ngx_uint_t>(NGX_LOG_ALERT));
    }
    c->log = &quiet_log_;
    c->log_error = NGX_ERROR_INFO;
    alert_ = 0;
    setup_error_ = "cannot start TLS";

    if (ngx_ssl_create_connection(const_cast<ngx_ssl_t*>(&ctx_->ssl), c, NGX_SSL_CLIENT) != NGX_OK) {
        return NGX_ERROR;
    }
    SSL* ssl = c->ssl->connection;
    if (SSL_set_ex_data(ssl, client_index, this) == 0) {
        return NGX_ERROR;
    }
    SSL_set_info_callback(ssl, on_info);

    if (host_len_ == 0 && ctx_->conf.name.len == 0) {
        // a node learnt at run time: the address connected to is its name
        host_len_ = ngx_sock_ntop(addr.sockaddr, addr.socklen, reinterpret_cast<u_char*>(host_), sizeof(host_) - 1, 0);
        host_[host_len_] = '\0';
        is_ip_ = true;
    }
    if (!is_ip_ && host_len_ > 0 && SSL_set_tlsext_host_name(ssl, host_) == 0) {
        return NGX_ERROR;
    }
    if (ngx_ssl_set_session(c, session_) != NGX_OK) {
        return NGX_ERROR;
    }
    c->ssl->save_session = on_new_session;
    setup_error_ = nullptr;

    ngx_int_t rc = ngx_ssl_handshake(c);
    if (rc == NGX_AGAIN) {
        c->ssl->handler = done;
    }
    return rc;
}

const char* TlsClient::check(ngx_connection_t* c, const ngx_str_t& redis, ngx_log_t* log) noexcept
{
    SSL* ssl = c->ssl->connection;
    const char* failed = nullptr;
    if (ctx_->conf.verify) {
        long rc = SSL_get_verify_result(ssl);
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
        X509* cert = rc == X509_V_OK ? SSL_get1_peer_certificate(ssl) : nullptr;
#else
        X509* cert = rc == X509_V_OK ? SSL_get_peer_certificate(ssl) : nullptr;
#endif
        if (rc != X509_V_OK) {
            std::string_view why = verify_reason(rc);
            ngx_snprintf(reinterpret_cast<u_char*>(reason_), sizeof(reason_) - 1, "%*s (%s)%Z", why.size(), why.data(),
                         X509_verify_cert_error_string(rc));
            failed = reason_;
        } else if (cert == nullptr) {
            failed = "Redis sent no certificate";
        } else if ((is_ip_ ? X509_check_ip_asc(cert, host_, 0) : X509_check_host(cert, host_, host_len_, 0, nullptr))
                   != 1) {
            ngx_snprintf(reinterpret_cast<u_char*>(reason_), sizeof(reason_) - 1,
                         "name mismatch: the certificate of Redis is not for \"%s\" (idempotency_redis_ssl_name)%Z",
                         host_);
            failed = reason_;
        }
        if (cert != nullptr) {
            X509_free(cert);
        }
    }
    if (failed != nullptr) {
        if (session_ != nullptr) {  // never resume what was not verified
            ngx_ssl_free_session(session_);
            session_ = nullptr;
        }
        return failed;
    }
    ngx_log_error(NGX_LOG_INFO, log, 0, "idempotency: Redis %V: TLS handshake done (%s, %s, %s)", &redis,
                  SSL_get_version(ssl), SSL_get_cipher_name(ssl), SSL_session_reused(ssl) ? "session reused" : "new session");
    return nullptr;
}

const char* TlsClient::failure() noexcept
{
    if (alert_ == 0) {
        return nullptr;
    }
    std::string_view why = alert_reason(alert_ & 0xff, alert_received_);
    ngx_snprintf(reinterpret_cast<u_char*>(reason_), sizeof(reason_) - 1, "%*s (TLS alert %d %s)%Z", why.size(),
                 why.data(), alert_ & 0xff, alert_received_ ? "from Redis" : "sent");
    return reason_;
}

const char* TlsClient::handshake_failure() noexcept
{
    if (setup_error_ != nullptr) {
        return setup_error_;
    }
    const char* why = failure();
    return why != nullptr ? why : "Redis closed the connection during the TLS handshake (is this its TLS port?)";
}

void TlsClient::close(ngx_connection_t* c) noexcept
{
    if (c->ssl != nullptr) {
        c->ssl->no_wait_shutdown = 1;
        c->ssl->no_send_shutdown = 1;
        (void) ngx_ssl_shutdown(c);  // quiet: returns at once, marks the session cleanly shut
    }
}

void TlsClient::on_info(const SSL* ssl, int where, int ret)
{
    if (!(where & SSL_CB_ALERT) || (ret >> 8) != SSL3_AL_FATAL) {
        return;  // close_notify and warnings tell nothing
    }
    TlsClient* self = client_of(ssl);
    if (self != nullptr) {
        self->alert_ = ret;
        self->alert_received_ = (where & SSL_CB_READ) != 0;
    }
}

// TLS 1.2 at the handshake, TLS 1.3 when a ticket arrives: the latest
// session is the one to resume.
void TlsClient::on_new_session(ngx_connection_t* c)
{
    TlsClient* self = client_of(c->ssl->connection);
    ngx_ssl_session_t* session = ngx_ssl_get_session(c);
    if (self == nullptr || session == nullptr) {
        if (session != nullptr) {
            ngx_ssl_free_session(session);
        }
        return;
    }
    if (self->session_ != nullptr) {
        ngx_ssl_free_session(self->session_);
    }
    self->session_ = session;
}

}  // namespace idem::redis
