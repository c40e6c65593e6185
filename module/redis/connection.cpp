// redis/connection.cpp — see connection.hpp.

#include "connection.hpp"

#include <hiredis/hiredis.h>

#include <cstring>

#include "../conf.hpp"
#include "../timing.hpp"
#include "info.hpp"
#include "reply_reader.hpp"

namespace idem::redis {
namespace {

constexpr Backoff reconnect_backoff{100, 1000};  // ms
// Each waiting request has its own one-timeout deadline and is abandoned
// alone; dropping the connection at the first miss would fail the young
// commands a stalled Redis (fork, slow command, failover) answers in time.
// Two timeouts of silence tell a dead Redis from a stalled one.
constexpr ngx_msec_t silence_timeouts = 2;

}  // namespace

Connection::Connection(const ngx_str_t& name, Addresses addrs, const RedisAuth& auth, ngx_log_t* log,
                       const ConnectionOptions& options) noexcept
    : name_(name), addrs_(addrs), auth_(auth), log_(log), large_replies_(options.large_replies),
      data_node_(options.data_node), tls_(options.tls), pipeline_(name, log)
{
    set_event(retry_event_, on_retry, this, log, true);
    set_event(failure_event_, on_deferred_failure, this, log);
    set_event(flush_event_, on_flush, this, log);
    next_ = all_;
    if (all_ != nullptr) {
        all_->prev_ = this;
    }
    all_ = this;
}

Connection::~Connection()
{
    (prev_ != nullptr ? prev_->next_ : all_) = next_;
    if (next_ != nullptr) {
        next_->prev_ = prev_;
    }
    closing_ = true;
    if (failure_event_.posted) {
        ngx_delete_posted_event(&failure_event_);
    }
    if (flush_event_.posted) {
        ngx_delete_posted_event(&flush_event_);
    }
    dispatching_ = 0;
    fail(nullptr, 0);
    if (retry_event_.timer_set) {
        ngx_del_timer(&retry_event_);
    }
}

void Connection::set_timeout(ngx_msec_t timeout) noexcept
{
    timeout_ = static_cast<ngx_msec_t>(shortest_timeout(timeout_, timeout));
}

bool Connection::command(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                         void* data, bool queue_while_down, Late late) noexcept
{
    if (closing_) {
        return false;
    }
    // No reply handler may run inside command(): its caller is in the middle
    // of queueing. A failure found here is handled from a posted event.
    dispatching_++;
    bool queued = queue(argc, argv, argv_len, handler, data, queue_while_down, late);
    dispatching_--;
    if (deferred_failure_ != nullptr && dispatching_ == 0 && !failure_event_.posted) {
        ngx_post_event(&failure_event_, &ngx_posted_events);
    }
    return queued;
}

bool Connection::queue(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
                       bool queue_while_down, Late late) noexcept
{
    bool broken = deferred_failure_ != nullptr;  // closes as soon as the loop turns
    if (broken && !queue_while_down) {
        return false;
    }
    if (state_ == State::down && !broken) {
        if (ngx_current_msec >= retry_at_) {
            connect();
        }
        if (state_ == State::down && !queue_while_down) {
            return false;
        }
    }

    if (late.render != nullptr ? !pipeline_.push_late(late, handler, data)
                               : !pipeline_.push(argc, argv, argv_len, handler, data, false)) {
        return false;
    }

    if (broken) {
        return true;  // failed with the others, then queued again by its handler
    }
    if (state_ == State::up) {
        // This turn's commands leave together after its I/O events: one send().
        if (!flush_event_.posted) {
            ngx_post_event(&flush_event_, &ngx_posted_events);
        }
    } else if (state_ == State::down && !retry_event_.timer_set) {
        // Nothing else will bring the connection back for this command.
        ngx_add_timer(&retry_event_, retry_at_ > ngx_current_msec ? retry_at_ - ngx_current_msec : 1);
    }
    return true;
}

void Connection::on_flush(ngx_event_t* ev)
{
    auto* self = static_cast<Connection*>(ev->data);
    if (self->state_ == State::up) {
        self->flush();
    }
}

Connection* Connection::all_ = nullptr;

void Connection::send_queued() noexcept
{
    // A connection with commands waiting has its flush event posted; a
    // flush runs no handler, so the list stays as it is while it is walked.
    for (Connection* c = all_; c != nullptr; c = c->next_) {
        if (!c->flush_event_.posted || c->dispatching_ > 0) {
            continue;  // nothing waiting; or called from its reply handler: its commands leave as posted
        }
        ngx_delete_posted_event(&c->flush_event_);
        if (c->state_ == State::up) {
            c->dispatching_++;
            c->flush();
            c->dispatching_--;
            if (c->deferred_failure_ != nullptr && !c->failure_event_.posted) {
                ngx_post_event(&c->failure_event_, &ngx_posted_events);
            }
        }
    }
}

void Connection::on_deferred_failure(ngx_event_t* ev)
{
    auto* self = static_cast<Connection*>(ev->data);
    const char* why = self->deferred_failure_;
    self->deferred_failure_ = nullptr;
    if (why != nullptr) {
        self->fail(why, 0);
    }
}


void Connection::fail(const char* why, ngx_err_t err, bool logged) noexcept
{
    if (dispatching_ > 0) {
        // A reply handler is running with pointers into our queue: close
        // once it returns.
        if (deferred_failure_ == nullptr) {
            deferred_failure_ = why ? why : "closed";
        }
        return;
    }
    if (why != nullptr && state_ == State::connecting && next_address(why, err)) {
        // Nothing was sent: what waits goes to the next address.
        close_socket();
        state_ = State::down;
        connect();
        return;
    }
    if (why != nullptr && !logged && (state_ != State::down || backoff_ == 0)) {
        if (addrs_.count > 1) {
            ngx_log_error(NGX_LOG_ERR, log_, err, "idempotency: Redis %V at %V: %s", &name_, &address().name, why);
        } else {
            ngx_log_error(NGX_LOG_ERR, log_, err, "idempotency: Redis %V: %s", &name_, why);
        }
    }
    close_socket();
    state_ = State::down;
    pipeline_.drop_unsent();
    if (why != nullptr && !replied_) {
        // This address did not answer: the next attempt starts at the next
        // one (one that worked is tried first again).
        current_ = (current_ + 1) % addrs_.count;
    }

    if (why != nullptr) {
        backoff_ = static_cast<ngx_msec_t>(reconnect_backoff.after(backoff_));
        retry_at_ = ngx_current_msec + backoff_;
        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: down (%s), reconnecting in %M ms at the earliest",
                       &name_, why, backoff_);
    }

    // Every command in flight gets "no reply"; handlers may queue again.
    Pending* p = pipeline_.take_all();
    while (p != nullptr) {
        Pending* next = p->next;
        ReplyHandler handler = p->handler;
        void* data = p->data;
        free_reply(p->error);
        pipeline_.give_back(p);
        if (handler != nullptr && !handshake_step(handler)) {
            handler(data, nullptr);
        }
        p = next;
    }
    if (why != nullptr && !closing_ && down_handler_ != nullptr) {
        down_handler_(down_data_);
    }
}

void Connection::close_socket() noexcept
{
    features_ = ServerFeatures{};  // the next connection learns its server's anew
    if (conn_ != nullptr) {
        ngx_pool_t* pool = conn_->pool;
        tls_.close(conn_);
        ngx_close_connection(conn_);
        conn_ = nullptr;
        if (pool != nullptr) {
            ngx_destroy_pool(pool);
        }
    }
    if (reader_ != nullptr) {
        redisReaderFree(reader_);
        reader_ = nullptr;
    }
}

void Connection::on_retry(ngx_event_t* ev)
{
    auto* self = static_cast<Connection*>(ev->data);
    if (self->state_ == State::down && self->pipeline_.awaiting()) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, self->log_, 0, "idempotency: Redis %V: reconnecting after the backoff",
                       &self->name_);
        self->connect();
    }
}


void Connection::on_write(ngx_event_t* ev)
{
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<Connection*>(c->data);

    if (self->state_ == State::connecting) {
        self->connect_finished(ev);
        return;
    }
    self->flush();
}

void Connection::flush() noexcept
{
    for (;;) {
        // A late command chooses its words now, as it leaves (pipeline.hpp).
        if (!pipeline_.render_due(features_)) {
            fail("out of memory", 0);
            return;
        }
        if (pipeline_.unsent_size() == 0) {
            break;
        }
        ssize_t n = conn_->send(conn_, pipeline_.unsent(), pipeline_.unsent_size());
        if (n == NGX_AGAIN) {
            break;
        }
        if (n == NGX_ERROR || n <= 0) {
            if (!tls_refused()) {
                fail("send() failed", ngx_socket_errno);
            }
            return;
        }
        pipeline_.sent(static_cast<size_t>(n));
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: sent %z bytes", &name_, n);
    }
    if (ngx_handle_write_event(conn_->write, 0) != NGX_OK) {
        fail("cannot watch the socket", 0);
        return;
    }
    arm_reply_timer();
}

// A Redis silent for silence_timeouts is dropped, failing what waits, and reconnected.
void Connection::arm_reply_timer() noexcept
{
    if (conn_ == nullptr) {
        return;
    }
    if (!pipeline_.awaiting()) {
        if (conn_->read->timer_set) {
            ngx_del_timer(conn_->read);
        }
    } else if (!conn_->read->timer_set) {
        ngx_add_timer(conn_->read, silence_timeouts * timeout_);
    }
}

}  // namespace idem::redis
