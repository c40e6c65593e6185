// redis/sentinel_router.cpp — every command goes to the master the sentinels
// name, asked of one after another. The master is asked for again when its
// connection is lost, before a command goes to one not connected (it may
// have died idle), and on READONLY (demoted by a failover; the command was
// not run, so it waits for the new master, up to max_redirects times).

#include <hiredis/hiredis.h>

#include <cstring>
#include <new>

#include "../conf.hpp"
#include "../timing.hpp"
#include "router.hpp"
#include "tls_conf.hpp"

namespace idem::redis {
namespace {

constexpr unsigned max_sentinels = 16;
constexpr unsigned max_waiting = 4096;
constexpr Backoff lookup_backoff{100, 1000};  // ms, between failed lookups of the master
constexpr unsigned max_stale_lookups = 50;  // about 5 s of a master answering READONLY

class SentinelRouter final : public Router {
public:
    SentinelRouter(const RedisServer& server, ngx_log_t* log) noexcept
        : server_(server), log_(log), lookup_timer_(on_lookup_event, this, log)
    {
    }

    bool start() noexcept
    {
        for (ngx_uint_t i = 0; i < server_.nurls && i < max_sentinels; i++) {
            const ngx_url_t& url = server_.urls[i];
            sentinels_[i] = new (std::nothrow) Connection(url.url, addresses_of(url), server_.sentinel_auth, log_,
                                                          ConnectionOptions::sentinel_at(tls_target(server_, view(url.host))));
            if (sentinels_[i] == nullptr) {
                return false;
            }
            sentinel_count_++;
        }
        return true;
    }

    ~SentinelRouter() override
    {
        closing_ = true;
        settle_waiting(nullptr);
        delete master_;
        free_endpoint(master_at_);
        for (unsigned i = 0; i < sentinel_count_; i++) {
            delete sentinels_[i];
        }
    }

    bool command(std::string_view key, int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                 void* data, bool queue_while_down, Late late) noexcept override
    {
        if (closing_) {
            return false;  // worker exit: what the connections fail must not queue again
        }
        if (master_ == nullptr && !queue_while_down && lookup_failed_) {
            request_lookup();
            return false;  // no master known, and the last lookup found none: answer now
        }
        OwnedCommand* c = own_command(key, argc, argv, argv_len, handler, data, queue_while_down, late, log_);
        if (c == nullptr) {
            return false;
        }
        c->router = this;
        // Asked for again first: it may have been replaced meanwhile. When the
        // sentinels cannot be asked, the last one known is tried.
        bool trusted = master_ != nullptr && (master_->up() || lookup_failed_);
        if (trusted && send_owned(*master_, c, on_reply)) {
            return true;
        }
        // No master yet, or down (a failover closes its clients): wait for
        // the sentinels' answer.
        if (!wait(c)) {
            ngx_free(c);
            return false;
        }
        request_lookup();
        return true;
    }

    void set_timeout(ngx_msec_t timeout) noexcept override
    {
        timeout_ = static_cast<ngx_msec_t>(shortest_timeout(timeout_, timeout));
        for (unsigned i = 0; i < sentinel_count_; i++) {
            sentinels_[i]->set_timeout(timeout_);
        }
        if (master_ != nullptr) {
            master_->set_timeout(timeout_);
        }
    }

private:
    bool wait(OwnedCommand* c) noexcept
    {
        if (waiting_count_ >= max_waiting) {
            return false;
        }
        c->next = nullptr;
        (waiting_tail_ ? waiting_tail_->next : waiting_head_) = c;
        waiting_tail_ = c;
        waiting_count_++;
        return true;
    }

    OwnedCommand* take_waiting() noexcept
    {
        OwnedCommand* all = waiting_head_;
        waiting_head_ = waiting_tail_ = nullptr;
        waiting_count_ = 0;
        return all;
    }

    // No reply when there is none, or it cannot be sent there.
    void settle_waiting(Connection* master) noexcept
    {
        for (OwnedCommand* c = take_waiting(); c != nullptr;) {
            OwnedCommand* next = c->next;
            if (master == nullptr || !send_owned(*master, c, on_reply)) {
                finish_owned(c, nullptr);
            }
            c = next;
        }
    }

    static void on_reply(void* data, redisReply* reply)
    {
        auto* c = static_cast<OwnedCommand*>(data);
        auto* self = static_cast<SentinelRouter*>(c->router);
        if (reply == nullptr && !self->closing_) {
            self->request_lookup();
        } else if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && !self->closing_
                   && std::strncmp(reply->str, "READONLY", 8) == 0 && c->redirects++ < max_redirects) {
            // Not run: the server is a replica now.
            self->stale_ = true;
            if (self->wait(c)) {
                self->request_lookup();
                return;
            }
        }
        finish_owned(c, reply);
    }

    static void on_master_down(void* data)
    {
        auto* self = static_cast<SentinelRouter*>(data);
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, self->log_, 0,
                       "idempotency: Redis Sentinel: the connection to master \"%V\" is lost: asking the sentinels",
                       &self->server_.master_name);
        self->request_lookup();
    }


    void request_lookup() noexcept
    {
        if (looking_ || lookup_timer_.event.timer_set || closing_) {
            return;
        }
        ngx_add_timer(&lookup_timer_.event, retry_at_ > ngx_current_msec ? retry_at_ - ngx_current_msec : 1);
    }

    static void on_lookup_event(ngx_event_t* ev) { static_cast<SentinelRouter*>(ev->data)->lookup(); }

    void lookup() noexcept
    {
        const char* argv[] = {"SENTINEL", "get-master-addr-by-name",
                              reinterpret_cast<const char*>(server_.master_name.data)};
        const size_t lens[] = {8, 23, server_.master_name.len};
        for (unsigned i = 0; i < sentinel_count_; i++) {
            unsigned k = (next_sentinel_ + i) % sentinel_count_;
            if (sentinels_[k]->resting()) {
                continue;
            }
            asked_ = k;
            looking_ = true;
            if (sentinels_[k]->command(3, argv, lens, on_master, this)) {
                return;
            }
            looking_ = false;
        }
        lookup_done(false, "no sentinel can be reached");
    }

    static void on_master(void* data, redisReply* reply)
    {
        auto* self = static_cast<SentinelRouter*>(data);
        self->looking_ = false;
        if (self->closing_) {
            return;
        }
        if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
            || reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_STRING) {
            // This sentinel cannot tell: the next one is asked next time.
            self->next_sentinel_ = self->asked_ + 1;
            if (reply != nullptr) {
                ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: sentinel %V does not know master \"%V\"%s%s",
                              &self->sentinels_[self->asked_]->name(), &self->server_.master_name,
                              reply->type == REDIS_REPLY_ERROR ? ": " : "",
                              reply->type == REDIS_REPLY_ERROR ? reply->str : "");
            }
            self->lookup_done(false, "the sentinels do not name it");
            return;
        }
        std::string_view host{reply->element[0]->str, reply->element[0]->len};
        std::string_view port_text{reply->element[1]->str, reply->element[1]->len};
        ngx_int_t port = ngx_atoi(reinterpret_cast<u_char*>(const_cast<char*>(port_text.data())), port_text.size());
        Endpoint* e = port > 0 && port <= 65535 ? make_endpoint(host, static_cast<unsigned>(port), self->log_) : nullptr;
        if (e == nullptr) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: sentinel %V names master \"%V\" at \"%*s:%*s\", "
                          "which is not an IP address and port", &self->sentinels_[self->asked_]->name(),
                          &self->server_.master_name, host.size(), host.data(), port_text.size(), port_text.data());
            self->lookup_done(false, "its address is not usable");
            return;
        }
        if (!self->use_master(e) && self->stale_ && self->stale_lookups_++ < max_stale_lookups) {
            // Still named master but READONLY: the failover is under way.
            self->retry_at_ = ngx_current_msec + static_cast<ngx_msec_t>(lookup_backoff.first);
            self->request_lookup();
            return;
        }
        self->stale_ = false;
        self->stale_lookups_ = 0;
        self->lookup_done(true, nullptr);
    }

    // True when it is new.
    bool use_master(Endpoint* e) noexcept
    {
        if (master_ != nullptr
            && ngx_cmp_sockaddr(master_at_->addr.sockaddr, master_at_->addr.socklen, e->addr.sockaddr,
                                e->addr.socklen, 1) == NGX_OK) {
            free_endpoint(e);
            return false;
        }
        Connection* conn = new (std::nothrow) Connection(e->name, one_address(e->addr), server_.auth, log_,
                                                         ConnectionOptions::data_node_at(tls_target(server_)));
        if (conn == nullptr) {
            free_endpoint(e);
            return false;
        }
        if (master_ != nullptr) {
            ngx_log_error(NGX_LOG_WARN, log_, 0, "idempotency: Redis Sentinel: master \"%V\" is %V, was %V",
                          &server_.master_name, &e->name, &master_at_->name);
        } else {
            ngx_log_error(NGX_LOG_INFO, log_, 0, "idempotency: Redis Sentinel: master \"%V\" is %V",
                          &server_.master_name, &e->name);
        }
        if (timeout_ != 0) {
            conn->set_timeout(timeout_);
        }
        conn->on_down(on_master_down, this);
        Connection* old = master_;
        Endpoint* old_at = master_at_;
        master_ = conn;
        master_at_ = e;
        stale_ = false;
        delete old;  // what waited on it gets no reply, as for any lost connection
        free_endpoint(old_at);
        return true;
    }

    void lookup_done(bool found, const char* why) noexcept
    {
        if (found) {
            backoff_ = 0;
            lookup_failed_ = false;
            retry_at_ = 0;
            settle_waiting(master_);
            return;
        }
        if (!lookup_failed_) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis Sentinel: cannot find master \"%V\": %s",
                          &server_.master_name, why);
        }
        lookup_failed_ = true;
        backoff_ = static_cast<ngx_msec_t>(lookup_backoff.after(backoff_));
        retry_at_ = ngx_current_msec + backoff_;
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis Sentinel: master \"%V\" looked up again in %M ms "
                       "at the earliest", &server_.master_name, backoff_);
        settle_waiting(master_);  // the last master known, if any: waiting longer would not help
    }

    const RedisServer& server_;
    ngx_log_t* log_;
    ngx_msec_t timeout_ = 0;
    Connection* sentinels_[max_sentinels]{};
    unsigned sentinel_count_ = 0;
    unsigned next_sentinel_ = 0;
    unsigned asked_ = 0;
    Connection* master_ = nullptr;
    Endpoint* master_at_ = nullptr;
    OwnedCommand* waiting_head_ = nullptr;
    OwnedCommand* waiting_tail_ = nullptr;
    unsigned waiting_count_ = 0;
    bool looking_ = false;
    bool lookup_failed_ = false;
    bool stale_ = false;  // the master answered READONLY
    unsigned stale_lookups_ = 0;
    bool closing_ = false;
    ngx_msec_t backoff_ = 0;
    ngx_msec_t retry_at_ = 0;
    OwnedTimer lookup_timer_;
};

}  // namespace

Router* make_sentinel_router(const RedisServer& server, ngx_log_t* log) noexcept
{
    return start_router<SentinelRouter>(server, log);
}

}  // namespace idem::redis
