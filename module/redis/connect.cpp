// redis/connect.cpp — a Connection's TCP connect, address after address (the
// next at once when one fails), then TLS or connected(), which queues the
// handshake ahead of what waited.

#include "../metrics.hpp"
#include "connection.hpp"
#include "reply_reader.hpp"

namespace idem::redis {

void Connection::connect() noexcept
{
    reader_ = create_reply_reader(large_replies_);
    if (reader_ == nullptr) {
        fail("cannot allocate a reply reader", 0);
        return;
    }
    replied_ = false;

    ngx_int_t rc = connect_to(address());
    while (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        ngx_err_t err = ngx_socket_errno;
        if (!next_address("connect() failed", err)) {
            fail("connect() failed", err);
            return;
        }
        rc = connect_to(address());
    }

    conn_->data = this;
    conn_->read->handler = on_read;
    conn_->write->handler = on_write;
    conn_->log = log_;
    conn_->read->log = log_;
    conn_->write->log = log_;
    conn_->pool = nullptr;
    state_ = State::connecting;
    if (tls_.enabled()) {
        conn_->pool = ngx_create_pool(512, log_);  // nginx's SSL connection lives there
        if (conn_->pool == nullptr) {
            fail("cannot allocate a pool", 0);
            return;
        }
    }

    if (rc == NGX_AGAIN) {
        ngx_add_timer(conn_->write, timeout_);
        return;
    }
    if (tls_.enabled()) {
        start_tls();
        return;
    }
    connected();
}

// NGX_AGAIN while under way; else (nginx logged why) NGX_DECLINED, NGX_BUSY
// or NGX_ERROR.
ngx_int_t Connection::connect_to(const ngx_addr_t& addr) noexcept
{
    peer_ = ngx_peer_connection_t{};
    peer_.sockaddr = addr.sockaddr;
    peer_.socklen = addr.socklen;
    peer_.name = const_cast<ngx_str_t*>(&addr.name);
    peer_.get = ngx_event_get_peer;
    peer_.log = log_;
    peer_.log_error = NGX_ERROR_ERR;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: connecting to %V", &name_, &addr.name);
    ngx_int_t rc = ngx_event_connect_peer(&peer_);
    conn_ = peer_.connection;
    return rc;
}

// True with the next address in use when this turn has one left; false when
// all failed (the next turn, after the backoff, starts again).
bool Connection::next_address(const char* why, ngx_err_t err) noexcept
{
    if (++failed_in_turn_ >= addrs_.count) {
        failed_in_turn_ = 0;
        return false;
    }
    const ngx_addr_t& failed = address();
    current_ = (current_ + 1) % addrs_.count;
    ngx_log_error(NGX_LOG_WARN, log_, err, "idempotency: Redis %V: trying %V next; %V: %s", &name_,
                  &address().name, &failed.name, why);
    return true;
}

// Whichever of the socket's events comes first: a refused connect often
// wakes the reading side before the writing one.
void Connection::connect_finished(ngx_event_t* ev) noexcept
{
    if (ev->timedout) {
        fail("connect timed out", NGX_ETIMEDOUT);
        return;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(conn_->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1) {
        err = ngx_socket_errno;
    }
    if (err) {
        fail("connect() failed", err);
        return;
    }
    if (tls_.enabled()) {
        start_tls();
        return;
    }
    connected();
}

void Connection::connected() noexcept
{
    if (conn_->write->timer_set) {
        ngx_del_timer(conn_->write);
    }
    state_ = State::up;
    failed_in_turn_ = 0;
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: connected to %V", &name_, &address().name);
    if (!handshake()) {
        fail("cannot queue the handshake", 0);
        return;
    }
    if (backoff_ != 0) {
        ngx_log_error(NGX_LOG_WARN, log_, 0, "idempotency: Redis %V is reachable again", &name_);
        count(Counter::redis_reconnects);
    }
    backoff_ = 0;
    flush();
}

}  // namespace idem::redis
