// redis/connection_tls.cpp — a Connection's TLS steps with `ssl`: after the
// TCP connect, the handshake, then connected(); a refusal is any Redis
// failure (reconnect with backoff).

#include "../metrics.hpp"
#include "connection.hpp"

namespace idem::redis {

// Within the connect's timeout; nothing queued (AUTH first) leaves before
// Redis's certificate passed.
void Connection::start_tls() noexcept
{
    if (!conn_->write->timer_set) {
        ngx_add_timer(conn_->write, timeout_);
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: TLS handshake with %V", &name_,
                   &address().name);
    ngx_int_t rc = tls_.start(conn_, address(), on_tls_handshake, log_);
    if (rc != NGX_AGAIN) {
        tls_done(rc == NGX_OK);
    }
}

void Connection::on_tls_handshake(ngx_connection_t* c)
{
    auto* self = static_cast<Connection*>(c->data);
    self->tls_done(c->ssl->handshaked);
}

void Connection::tls_done(bool handshaken) noexcept
{
    if (!handshaken) {
        if (conn_->write->timedout || conn_->read->timedout) {
            count(Counter::redis_timeouts);
            fail("TLS handshake timed out", NGX_ETIMEDOUT);
            return;
        }
        tls_failed(tls_.handshake_failure());
        return;
    }
    if (const char* why = tls_.check(conn_, name_, log_)) {
        tls_failed(why);
        return;
    }
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: TLS handshake done, certificate checked",
                   &name_);
    conn_->read->handler = on_read;
    conn_->write->handler = on_write;
    connected();
    if (conn_ != nullptr && conn_->read->ready && !conn_->read->posted) {
        ngx_post_event(conn_->read, &ngx_posted_events);  // what came with the handshake's last record
    }
}

// Logged once an outage (each reconnection meets the same refusal), counted always.
void Connection::tls_failed(const char* why) noexcept
{
    count(Counter::redis_tls_failures);
    if (backoff_ == 0) {
        ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis %V: TLS failed: %s", &name_, why);
    }
    fail("TLS failed", 0, true);
}

// A fatal alert, or a break before any reply: TLS 1.3 checks the client
// certificate after the client's handshake, and the alert may be lost to a reset.
bool Connection::tls_refused() noexcept
{
    if (!tls_.enabled() || (tls_.failure() == nullptr && replied_)) {
        return false;
    }
    tls_failed(tls_.failure() ? tls_.failure()
                              : "Redis closed the connection right after the TLS handshake: it may require or refuse "
                                "the client certificate (idempotency_redis_ssl_certificate)");
    return true;
}

}  // namespace idem::redis
