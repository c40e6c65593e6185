// redis/connection_read.cpp — a connection's reply side: bytes parsed by
// hiredis and handed to their commands oldest first; a transaction's
// statuses counted, its replies kept for its last. A handler that breaks
// the connection has the failure run once it returned. Must not touch what
// a reply says.

#include "connection.hpp"

#include <hiredis/hiredis.h>

#include "../metrics.hpp"
#include "../timing.hpp"
#include "reply_reader.hpp"

namespace idem::redis {
namespace {

constexpr size_t read_chunk = 16 * 1024;

}  // namespace

void Connection::on_read(ngx_event_t* ev)
{
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<Connection*>(c->data);
    if (self->state_ == State::connecting) {
        self->connect_finished(ev);
        return;
    }
    if (ev->timedout) {
        ev->timedout = 0;
        count(Counter::redis_timeouts);
        self->fail("nothing from Redis for twice idempotency_redis_timeout", NGX_ETIMEDOUT);
        return;
    }
    self->read();
}

void Connection::read() noexcept
{
    char buf[read_chunk];
    for (;;) {
        ssize_t n = conn_->recv(conn_, reinterpret_cast<u_char*>(buf), sizeof(buf));
        if (n == NGX_AGAIN) {
            break;
        }
        if (!feed_reader(buf, n) || !dispatch_replies()) {
            return;  // the connection failed
        }
        if (!conn_->read->ready) {
            break;  // nginx saw the socket drained: no recv() only to hear EAGAIN
        }
    }
    if (ngx_handle_read_event(conn_->read, 0) != NGX_OK) {
        fail("cannot watch the socket", 0);
        return;
    }
    arm_reply_timer();
}

// False when the connection failed: closed, broken, or bytes unbufferable.
bool Connection::feed_reader(const char* buf, ssize_t n) noexcept
{
    if (n <= 0 && tls_refused()) {
        return false;
    }
    if (n == 0) {
        fail("connection closed by Redis", 0);
        return false;
    }
    if (n < 0) {
        fail("recv() failed", ngx_socket_errno);
        return false;
    }
    if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
        fail("cannot buffer the reply", 0);
        return false;
    }
    if (conn_->read->timer_set) {
        ngx_del_timer(conn_->read);  // progress: the timeout starts again
    }
    return true;
}

// False when the connection failed.
bool Connection::dispatch_replies() noexcept
{
    while (has_unread(reader_)) {
        if (skip_transaction_status()) {
            continue;
        }
        void* reply = nullptr;
        if (read_reply(reader_, &reply) != REDIS_OK) {
            fail("malformed reply", 0);
            return false;
        }
        if (reply == nullptr) {
            break;
        }
        if (!take_reply(static_cast<redisReply*>(reply))) {
            return false;
        }
    }
    return true;
}

// A transaction's OK and QUEUED are only counted, no reply made of them.
bool Connection::skip_transaction_status() noexcept
{
    Pending* waiting = pipeline_.oldest();
    if (waiting == nullptr || waiting->more == 0 || !skip_plain_status(reader_)) {
        return false;
    }
    replied_ = true;
    waiting->more--;
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: reply read (status), one of several", &name_);
    return true;
}

// One of a transaction's replies waits for the last; false when the
// connection failed.
bool Connection::take_reply(redisReply* reply) noexcept
{
    replied_ = true;
    Pending* p = pipeline_.oldest();
    if (p == nullptr) {
        free_reply(reply);
        fail("reply to no command", 0);
        return false;
    }
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: reply read (%s)%s", &name_,
                   reply_kind(reply->type), p->more > 0 ? ", one of several" : "");
    bool error = reply->type == REDIS_REPLY_ERROR;
    if (error) {
        count(Counter::redis_errors);
    }
    if (p->more > 0) {
        // Its first error is kept for the handler, the rest let go.
        p->more--;
        if (error && p->error == nullptr) {
            p->error = reply;
        } else {
            free_reply(reply);
        }
        return true;
    }
    return answer(p, reply);
}

// Or the first error among a transaction's replies; false when the handler
// caused a failure, run once it returned.
bool Connection::answer(Pending* p, redisReply* reply) noexcept
{
    pipeline_.pop();
    ReplyHandler handler = p->handler;
    void* data = p->data;
    redisReply* held = p->error;
    observe_redis_rtt(monotonic_us() - p->queued_us);
    pipeline_.give_back(p);

    dispatching_++;
    if (handler != nullptr) {
        handler(data, held != nullptr ? held : reply);
    }
    dispatching_--;
    free_reply(held);
    free_reply(reply);

    if (deferred_failure_ != nullptr) {
        const char* why = deferred_failure_;
        deferred_failure_ = nullptr;
        fail(why, 0);
        return false;
    }
    return true;
}

}  // namespace idem::redis
