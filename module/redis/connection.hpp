// redis/connection.hpp — one non-blocking, pipelined connection from a worker
// to one Redis server on nginx's event loop; replies matched in order. Owns
// the socket, AUTH/SELECT, reconnect with backoff, the timeouts, the
// transport's debug trace and the choice among resolved addresses (a failed
// connect moves on at once with what was queued). Knows nothing of requests
// or records. See docs/design.md#store-protocols.
#pragma once

#include <cstdint>

#include "../ngx.hpp"
#include "pipeline.hpp"
#include "tls.hpp"

struct redisReader;

namespace idem {
struct RedisAuth;
}

namespace idem::redis {

// In the resolver's order, or one address learnt at run time; they outlive
// the connection.
struct Addresses {
    const ngx_addr_t* addrs;
    ngx_uint_t count;
};

inline Addresses addresses_of(const ngx_url_t& url) noexcept { return {url.addrs, url.naddrs}; }
inline Addresses one_address(const ngx_addr_t& addr) noexcept { return {&addr, 1}; }

struct ConnectionOptions {
    // Arrays up to 16384 elements (the cluster's slot map); else 16, which
    // the store's commands never exceed.
    bool large_replies = false;
    // Each new connection checks Redis will not evict the keys (INFO memory).
    bool data_node = true;
    // Its context outlives the connection.
    TlsTarget tls = {};

    static ConnectionOptions data_node_at(TlsTarget tls) noexcept { return {false, true, tls}; }
    static ConnectionOptions cluster_node_at(TlsTarget tls) noexcept { return {true, true, tls}; }
    static ConnectionOptions sentinel_at(TlsTarget tls) noexcept { return {false, false, tls}; }
};

class Connection {
public:
    // `name` (for logs), `addrs` and `auth` must outlive the connection.
    Connection(const ngx_str_t& name, Addresses addrs, const RedisAuth& auth, ngx_log_t* log,
               const ConnectionOptions& options = {}) noexcept;
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // False, without calling `handler`, when the server is down within its
    // backoff — unless `queue_while_down` (releases that must not be lost).
    // With `late`, argv is unused: words are chosen as it leaves.
    bool command(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                 void* data, bool queue_while_down = false, Late late = {}) noexcept;

    // Flushes every connection's queue now, so a store or release reaches
    // Redis before the response that settles the key reaches the client
    // (docs/design.md#settled-before-answered). No reply handler runs inside:
    // a failure found here is handled from a posted event.
    static void send_queued() noexcept;

    // The shortest idempotency_redis_timeout of its users; the connection is
    // dropped only after twice that without a byte from Redis.
    void set_timeout(ngx_msec_t timeout) noexcept;

    // Told each time the connection is lost, not when its owner closes it;
    // runs after the commands in flight were failed, and must not delete it.
    using DownHandler = void (*)(void* data);
    void on_down(DownHandler handler, void* data) noexcept
    {
        down_handler_ = handler;
        down_data_ = data;
    }

    bool up() const noexcept { return state_ == State::up; }
    bool resting() const noexcept { return state_ == State::down && ngx_current_msec < retry_at_; }
    const ngx_str_t& name() const noexcept { return name_; }
    const ngx_addr_t& address() const noexcept { return addrs_.addrs[current_]; }

private:
    enum class State { down, connecting, up };

    bool queue(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
               bool queue_while_down, Late late) noexcept;
    void connect() noexcept;
    ngx_int_t connect_to(const ngx_addr_t& addr) noexcept;
    bool next_address(const char* why, ngx_err_t err) noexcept;
    void connect_finished(ngx_event_t* ev) noexcept;
    void close_socket() noexcept;
    void connected() noexcept;
    void start_tls() noexcept;
    void tls_done(bool handshaken) noexcept;
    void tls_failed(const char* why) noexcept;
    bool tls_refused() noexcept;
    void fail(const char* why, ngx_err_t err, bool logged = false) noexcept;
    void flush() noexcept;
    void read() noexcept;
    bool feed_reader(const char* buf, ssize_t n) noexcept;
    bool dispatch_replies() noexcept;
    bool skip_transaction_status() noexcept;
    bool take_reply(redisReply* reply) noexcept;
    bool answer(Pending* p, redisReply* reply) noexcept;
    void arm_reply_timer() noexcept;
    bool handshake() noexcept;

    static void on_read(ngx_event_t* ev);
    static void on_write(ngx_event_t* ev);
    static void on_retry(ngx_event_t* ev);
    static void on_deferred_failure(ngx_event_t* ev);
    static void on_flush(ngx_event_t* ev);
    static void on_tls_handshake(ngx_connection_t* c);
    static void on_handshake_reply(void* data, redisReply* reply);
    static void on_memory_info(void* data, redisReply* reply);
    static void on_server_info(void* data, redisReply* reply);
    static void on_script_loaded(void* data, redisReply* reply);
    static bool handshake_step(ReplyHandler handler) noexcept;  // one of the four above
    bool load_scripts() noexcept;

    const ngx_str_t& name_;
    Addresses addrs_;
    ngx_uint_t current_ = 0;  // the address connected to, or tried next
    ngx_uint_t failed_in_turn_ = 0;  // addresses that failed to connect since one last did
    const RedisAuth& auth_;
    ngx_log_t* log_;
    bool large_replies_;
    bool data_node_;
    State state_ = State::down;
    ngx_peer_connection_t peer_{};
    ngx_connection_t* conn_ = nullptr;
    redisReader* reader_ = nullptr;
    TlsClient tls_;

    Pipeline pipeline_;
    ServerFeatures features_;  // what this connection's server runs, once its INFO server came back

    ngx_msec_t timeout_ = 0;  // unset until the first user sets it
    ngx_msec_t backoff_ = 0;  // the last wait before reconnecting; 0: the last connect worked
    ngx_msec_t retry_at_ = 0;
    ngx_event_t retry_event_{};
    ngx_event_t failure_event_{};  // runs a failure found inside command()
    ngx_event_t flush_event_{};    // writes what this event-loop turn queued, in one send()
    static Connection* all_;
    Connection* prev_ = nullptr;
    Connection* next_ = nullptr;
    bool closing_ = false;    // worker exit: accept nothing more
    bool replied_ = false;    // this connection has had a reply
    int dispatching_ = 0;     // inside reply handlers or command(): defer failures
    const char* deferred_failure_ = nullptr;
    DownHandler down_handler_ = nullptr;
    void* down_data_ = nullptr;
};

}  // namespace idem::redis
