// redis/connection_read.cpp — the replies' side of a connection's wire
// (connection.hpp): the bytes Redis sent, read as nginx says they are
// ready, parsed by hiredis (reply_reader.hpp) and handed, reply after
// reply, to the commands they answer, oldest first; a transaction's
// statuses are counted, its replies kept for its last one. A reply handler
// that breaks the connection has its failure run once it returned.
// Owns: the read timer's restart on progress, the replies' matching to
// commands, the round-trip time of each (metrics.hpp).
// Must not touch: what a reply says (its handler's).

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

// What one recv() returned (`n`: its count) goes to the reply reader;
// false when the connection failed: closed, broken, or the bytes cannot
// be buffered.
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

// Every whole reply the reader holds goes to its command, oldest first;
// false when the connection failed.
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

// One of several commands answered as one (a transaction): its OK and
// QUEUED are only counted, no reply made of them. True when one was.
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

// A reply, to the oldest command: one of several commands answered as one
// waits for the last, else the command has its answer; false when the
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
        // One of several commands answered as one: its first error is kept
        // for the handler, the rest let go.
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

// The command's last reply: its handler gets it (or the first error among
// the replies of its several commands); a failure the handler caused is
// run once it returned, and then false.
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
