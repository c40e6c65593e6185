// redis/connection.cpp — see connection.hpp.

#include "connection.hpp"

#include <hiredis/hiredis.h>

#include <cstring>

#include "../conf.hpp"
#include "info.hpp"
#include "resp.hpp"
#include "../metrics.hpp"

namespace idem::redis {
namespace {

constexpr ngx_msec_t first_backoff = 100;

// The store's replies are never arrays (nil, bulk strings, integers,
// status, errors), Sentinel's master address is an array of 2, and the
// cluster's slot map has at most one entry per slot. hiredis reserves room
// for whatever element count an array announces, so a broken or hostile
// server sending "*2147483647" could make a worker allocate and free
// gigabytes; longer arrays are refused before anything is allocated, and
// the connection is dropped.
constexpr int max_reply_elements = 16;
constexpr int max_large_reply_elements = 16384;

redisReplyObjectFunctions small_functions;
redisReplyObjectFunctions large_functions;
void* (*default_create_array)(const redisReadTask*, int) = nullptr;

void* create_small_array(const redisReadTask* task, int elements)
{
    return elements > max_reply_elements ? nullptr : default_create_array(task, elements);
}

void* create_large_array(const redisReadTask* task, int elements)
{
    return elements > max_large_reply_elements ? nullptr : default_create_array(task, elements);
}

// A reader with hiredis's own reply objects but for the array guard.
redisReader* create_reader(bool large) noexcept
{
    if (default_create_array == nullptr) {
        redisReader* probe = redisReaderCreate();
        if (probe == nullptr) {
            return nullptr;
        }
        small_functions = *probe->fn;
        redisReaderFree(probe);
        default_create_array = small_functions.createArray;
        large_functions = small_functions;
        small_functions.createArray = create_small_array;
        large_functions.createArray = create_large_array;
    }
    return redisReaderCreateWithFunctions(large ? &large_functions : &small_functions);
}
constexpr ngx_msec_t max_backoff = 1000;
constexpr size_t read_chunk = 16 * 1024;

}  // namespace

Connection::Connection(const ngx_str_t& name, const ngx_addr_t& addr, const RedisAuth& auth, ngx_log_t* log,
                       bool large_replies, bool data_node) noexcept
    : name_(name), addr_(addr), auth_(auth), log_(log), large_replies_(large_replies), data_node_(data_node)
{
    retry_event_.handler = on_retry;
    retry_event_.data = this;
    retry_event_.log = log;
    retry_event_.cancelable = 1;
    failure_event_.handler = on_deferred_failure;
    failure_event_.data = this;
    failure_event_.log = log;
    flush_event_.handler = on_flush;
    flush_event_.data = this;
    flush_event_.log = log;
}

Connection::~Connection()
{
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
    while (free_ != nullptr) {
        Pending* p = free_;
        free_ = p->next;
        ngx_free(p);
    }
    ngx_free(out_);
}

void Connection::set_timeout(ngx_msec_t timeout) noexcept
{
    if (timeout < timeout_ || timeout_ == 0) {
        timeout_ = timeout;
    }
}

bool Connection::command(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                         void* data, bool queue_while_down) noexcept
{
    if (closing_) {
        return false;
    }
    // No reply handler may run inside command(): its caller is in the middle
    // of queueing. A failure found here is handled from a posted event.
    dispatching_++;
    bool queued = queue(argc, argv, argv_len, handler, data, queue_while_down);
    dispatching_--;
    if (deferred_failure_ != nullptr && dispatching_ == 0 && !failure_event_.posted) {
        ngx_post_event(&failure_event_, &ngx_posted_events);
    }
    return queued;
}

bool Connection::queue(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
                       bool queue_while_down) noexcept
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

    if (!push(argc, argv, argv_len, handler, data, false)) {
        return false;
    }

    if (broken) {
        return true;  // failed with the others, then queued again by its handler
    }
    if (state_ == State::up) {
        // Commands from every request handled in this turn of the event
        // loop leave together, after its I/O events: one send() for many,
        // and Redis reads them in one go.
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

void Connection::on_deferred_failure(ngx_event_t* ev)
{
    auto* self = static_cast<Connection*>(ev->data);
    const char* why = self->deferred_failure_;
    self->deferred_failure_ = nullptr;
    if (why != nullptr) {
        self->fail(why, 0);
    }
}

// Makes room for `size` more bytes at out_ + out_len_.
bool Connection::reserve(size_t size) noexcept
{
    if (out_pos_ > 0 && out_pos_ == out_len_) {
        out_pos_ = out_len_ = 0;
    }
    if (out_len_ + size <= out_cap_) {
        return true;
    }
    size_t waiting = out_len_ - out_pos_;
    size_t cap = out_cap_ ? out_cap_ : 4096;
    while (cap < waiting + size) {
        cap *= 2;
    }
    auto* grown = static_cast<char*>(ngx_alloc(cap, log_));
    if (grown == nullptr) {
        return false;
    }
    if (waiting) {
        std::memcpy(grown, out_ + out_pos_, waiting);
    }
    ngx_free(out_);
    out_ = grown;
    out_cap_ = cap;
    out_pos_ = 0;
    out_len_ = waiting;
    return true;
}

Pending* Connection::take_pending() noexcept
{
    Pending* p = free_;
    if (p != nullptr) {
        free_ = p->next;
        return p;
    }
    return static_cast<Pending*>(ngx_alloc(sizeof(Pending), log_));
}

void Connection::give_back(Pending* p) noexcept
{
    if (p != nullptr) {
        p->next = free_;
        free_ = p;
    }
}

// Writes a command into the output buffer and links its reply slot: at the
// back, or at the front for the handshake, which goes before anything queued
// while the connection was down.
bool Connection::push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
                      bool front) noexcept
{
    Pending* p = take_pending();
    size_t size = resp_size(argc, argv_len);
    if (p == nullptr || !reserve(size)) {
        give_back(p);
        return false;
    }
    char* at = out_ + out_len_;
    if (front) {
        at = out_ + out_pos_;
        std::memmove(at + size, at, out_len_ - out_pos_);
    }
    resp_write(at, argc, argv, argv_len);
    out_len_ += size;
    p->handler = handler;
    p->data = data;
    p->queued_us = monotonic_us();
    if (front) {
        p->next = head_;
        head_ = p;
        if (tail_ == nullptr) {
            tail_ = p;
        }
    } else {
        p->next = nullptr;
        (tail_ ? tail_->next : head_) = p;
        tail_ = p;
    }
    count(Counter::redis_commands);
    return true;
}

// ------------------------------------------------------------- connecting

void Connection::connect() noexcept
{
    peer_ = ngx_peer_connection_t{};
    peer_.sockaddr = addr_.sockaddr;
    peer_.socklen = addr_.socklen;
    peer_.name = const_cast<ngx_str_t*>(&addr_.name);
    peer_.get = ngx_event_get_peer;
    peer_.log = log_;
    peer_.log_error = NGX_ERROR_ERR;

    reader_ = create_reader(large_replies_);
    if (reader_ == nullptr) {
        fail("cannot allocate a reply reader", 0);
        return;
    }

    ngx_int_t rc = ngx_event_connect_peer(&peer_);
    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        conn_ = peer_.connection;
        fail("connect() failed", ngx_socket_errno);
        return;
    }

    conn_ = peer_.connection;
    conn_->data = this;
    conn_->read->handler = on_read;
    conn_->write->handler = on_write;
    conn_->log = log_;
    conn_->read->log = log_;
    conn_->write->log = log_;
    conn_->pool = nullptr;
    state_ = State::connecting;

    if (!handshake()) {
        fail("cannot queue the handshake", 0);
        return;
    }

    if (rc == NGX_AGAIN) {
        ngx_add_timer(conn_->write, timeout_);
        return;
    }
    connected();
}

// AUTH and SELECT go first on every new connection, pipelined with whatever
// was queued meanwhile; a failure of either closes the connection. On a data
// node, INFO memory follows them: an eviction policy other than noeviction
// is worth a warning, once per connection.
bool Connection::handshake() noexcept
{
    // pushed to the front in reverse: AUTH, then SELECT, then INFO go out
    if (data_node_) {
        const char* argv[] = {"INFO", "memory"};
        const size_t lens[] = {4, 6};
        if (!push(2, argv, lens, on_memory_info, this, true)) {
            return false;
        }
    }
    if (auth_.db != 0) {
        char db[NGX_INT_T_LEN];
        size_t db_len = static_cast<size_t>(ngx_sprintf(reinterpret_cast<u_char*>(db), "%i", auth_.db) - reinterpret_cast<u_char*>(db));
        const char* argv[] = {"SELECT", db};
        const size_t lens[] = {6, db_len};
        if (!push(2, argv, lens, on_handshake_reply, this, true)) {
            return false;
        }
    }
    if (auth_.password.len) {
        const char* argv[3] = {"AUTH"};
        size_t lens[3] = {4};
        int argc = 1;
        if (auth_.username.len) {
            argv[argc] = reinterpret_cast<const char*>(auth_.username.data);
            lens[argc++] = auth_.username.len;
        }
        argv[argc] = reinterpret_cast<const char*>(auth_.password.data);
        lens[argc++] = auth_.password.len;
        if (!push(argc, argv, lens, on_handshake_reply, this, true)) {
            return false;
        }
    }
    return true;
}

void Connection::on_handshake_reply(void* data, redisReply* reply)
{
    auto* self = static_cast<Connection*>(data);
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the handshake: %s",
                      &self->name_, reply->str);
        self->fail(nullptr, 0);
    }
}

void Connection::on_memory_info(void* data, redisReply* reply)
{
    auto* self = static_cast<Connection*>(data);
    if (reply == nullptr || reply->type != REDIS_REPLY_STRING) {
        return;  // lost with the connection, or INFO refused (managed Redis): nothing to say
    }
    std::string_view policy = info_field({reply->str, reply->len}, "maxmemory_policy");
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, self->log_, 0, "idempotency: Redis %V: maxmemory_policy %*s", &self->name_,
                   policy.size(), policy.data());
    if (evicts_module_keys(policy)) {
        ngx_log_error(NGX_LOG_WARN, self->log_, 0,
                      "idempotency: Redis %V has maxmemory-policy %*s: when full it evicts claims and stored "
                      "responses (all have a TTL), and their retries execute again; set maxmemory-policy noeviction",
                      &self->name_, policy.size(), policy.data());
    }
}

void Connection::connected() noexcept
{
    if (conn_->write->timer_set) {
        ngx_del_timer(conn_->write);
    }
    state_ = State::up;
    if (backoff_ != 0) {
        ngx_log_error(NGX_LOG_WARN, log_, 0, "idempotency: Redis %V is reachable again", &name_);
        count(Counter::redis_reconnects);
    }
    backoff_ = 0;
    flush();
}

void Connection::fail(const char* why, ngx_err_t err) noexcept
{
    if (dispatching_ > 0) {
        // A reply handler is running with pointers into our queue: close
        // once it returns.
        if (deferred_failure_ == nullptr) {
            deferred_failure_ = why ? why : "closed";
        }
        return;
    }
    if (why != nullptr && (state_ != State::down || backoff_ == 0)) {
        ngx_log_error(NGX_LOG_ERR, log_, err, "idempotency: Redis %V: %s", &name_, why);
    }
    if (conn_ != nullptr) {
        ngx_close_connection(conn_);
        conn_ = nullptr;
    }
    if (reader_ != nullptr) {
        redisReaderFree(reader_);
        reader_ = nullptr;
    }
    state_ = State::down;
    out_pos_ = out_len_ = 0;

    if (why != nullptr) {
        backoff_ = backoff_ ? ngx_min(backoff_ * 2, max_backoff) : first_backoff;
        retry_at_ = ngx_current_msec + backoff_;
    }

    // Every command in flight gets "no reply"; handlers may queue again.
    Pending* p = head_;
    head_ = tail_ = nullptr;
    while (p != nullptr) {
        Pending* next = p->next;
        ReplyHandler handler = p->handler;
        void* data = p->data;
        p->next = free_;
        free_ = p;
        if (handler != nullptr && handler != on_handshake_reply && handler != on_memory_info) {
            handler(data, nullptr);
        }
        p = next;
    }
}

void Connection::on_retry(ngx_event_t* ev)
{
    auto* self = static_cast<Connection*>(ev->data);
    if (self->state_ == State::down && self->head_ != nullptr) {
        self->connect();
    }
}

// -------------------------------------------------------------- the wire

void Connection::on_write(ngx_event_t* ev)
{
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<Connection*>(c->data);

    if (self->state_ == State::connecting) {
        if (ev->timedout) {
            self->fail("connect timed out", NGX_ETIMEDOUT);
            return;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1) {
            err = ngx_socket_errno;
        }
        if (err) {
            self->fail("connect() failed", err);
            return;
        }
        self->connected();
        return;
    }
    self->flush();
}

void Connection::flush() noexcept
{
    while (out_pos_ < out_len_) {
        ssize_t n = conn_->send(conn_, reinterpret_cast<u_char*>(out_ + out_pos_), out_len_ - out_pos_);
        if (n == NGX_AGAIN) {
            break;
        }
        if (n == NGX_ERROR || n <= 0) {
            fail("send() failed", ngx_socket_errno);
            return;
        }
        out_pos_ += static_cast<size_t>(n);
    }
    if (out_pos_ == out_len_) {
        out_pos_ = out_len_ = 0;
    }
    if (ngx_handle_write_event(conn_->write, 0) != NGX_OK) {
        fail("cannot watch the socket", 0);
        return;
    }
    arm_reply_timer();
}

// The read timer runs while replies are owed: a Redis that stops answering
// is dropped after timeout_, failing what waits on it, and reconnected.
void Connection::arm_reply_timer() noexcept
{
    if (conn_ == nullptr) {
        return;
    }
    if (head_ == nullptr) {
        if (conn_->read->timer_set) {
            ngx_del_timer(conn_->read);
        }
    } else if (!conn_->read->timer_set) {
        ngx_add_timer(conn_->read, timeout_);
    }
}

void Connection::on_read(ngx_event_t* ev)
{
    auto* c = static_cast<ngx_connection_t*>(ev->data);
    auto* self = static_cast<Connection*>(c->data);
    if (ev->timedout) {
        ev->timedout = 0;
        count(Counter::redis_timeouts);
        self->fail("no reply within idempotency_redis_timeout", NGX_ETIMEDOUT);
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
        if (n == 0) {
            fail("connection closed by Redis", 0);
            return;
        }
        if (n < 0) {
            fail("recv() failed", ngx_socket_errno);
            return;
        }
        if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
            fail("cannot buffer the reply", 0);
            return;
        }
        if (conn_->read->timer_set) {
            ngx_del_timer(conn_->read);  // progress: the timeout starts again
        }

        for (;;) {
            void* reply = nullptr;
            if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
                fail("malformed reply", 0);
                return;
            }
            if (reply == nullptr) {
                break;
            }
            Pending* p = head_;
            if (p == nullptr) {
                freeReplyObject(reply);
                fail("reply to no command", 0);
                return;
            }
            head_ = p->next;
            if (head_ == nullptr) {
                tail_ = nullptr;
            }
            ReplyHandler handler = p->handler;
            void* data = p->data;
            observe_redis_rtt(monotonic_us() - p->queued_us);
            if (static_cast<redisReply*>(reply)->type == REDIS_REPLY_ERROR) {
                count(Counter::redis_errors);
            }
            p->next = free_;
            free_ = p;

            dispatching_++;
            if (handler != nullptr) {
                handler(data, static_cast<redisReply*>(reply));
            }
            dispatching_--;
            freeReplyObject(reply);

            if (deferred_failure_ != nullptr) {
                const char* why = deferred_failure_;
                deferred_failure_ = nullptr;
                fail(why, 0);
                return;
            }
        }
    }
    if (ngx_handle_read_event(conn_->read, 0) != NGX_OK) {
        fail("cannot watch the socket", 0);
        return;
    }
    arm_reply_timer();
}

}  // namespace idem::redis
