// redis/cluster_router.cpp — one connection per node, each command to its
// slot's master. CLUSTER SLOTS is asked again on MOVED, on an unreachable
// node and on CLUSTERDOWN; MOVED and ASK are followed at once, up to
// max_redirects hops.

#include <hiredis/hiredis.h>

#include <cstring>
#include <new>

#include "../conf.hpp"
#include "cluster.hpp"
#include "../timing.hpp"
#include "router.hpp"
#include "tls_conf.hpp"

namespace idem::redis {
namespace {

constexpr unsigned max_nodes = 64;
constexpr ngx_msec_t refresh_interval = 100;  // at most one CLUSTER SLOTS per interval
constexpr ngx_msec_t failover_poll = 500;     // while a master in the map is unreachable

class ClusterRouter final : public Router {
public:
    ClusterRouter(const RedisServer& server, ngx_log_t* log) noexcept
        : server_(server), log_(log), refresh_timer_(on_refresh_event, this, log)
    {
    }

    ~ClusterRouter() override
    {
        closing_ = true;
        for (unsigned i = 0; i < node_count_; i++) {
            delete nodes_[i].conn;
            free_endpoint(nodes_[i].endpoint);
        }
    }

    bool start() noexcept
    {
        for (ngx_uint_t i = 0; i < server_.nurls; i++) {
            const ngx_url_t& url = server_.urls[i];
            if (add_node(nullptr, addresses_of(url), url.url, view(url.host)) == nullptr) {
                return false;
            }
        }
        return true;
    }

    bool command(std::string_view key, int argc, const char** argv, const size_t* argv_len, ReplyHandler handler,
                 void* data, bool queue_while_down, Late late) noexcept override
    {
        if (closing_) {
            return false;  // worker exit: what the connections fail must not queue again
        }
        OwnedCommand* c = own_command(key, argc, argv, argv_len, handler, data, queue_while_down, late, log_);
        if (c == nullptr) {
            return false;
        }
        c->router = this;
        unsigned slot = key_slot(key);
        unsigned node = slots_[slot];
        if (node == 0) {
            request_refresh();
            node = any_node();
        }
        if (node == 0 || !send(node - 1, c)) {
            ngx_free(c);
            if (node != 0) {
                nodes_[node - 1].failed = true;
            }
            request_refresh();  // its node may have failed over
            return false;
        }
        return true;
    }

    void set_timeout(ngx_msec_t timeout) noexcept override
    {
        timeout_ = static_cast<ngx_msec_t>(shortest_timeout(timeout_, timeout));
        for (unsigned i = 0; i < node_count_; i++) {
            nodes_[i].conn->set_timeout(timeout_);
        }
    }

private:
    struct Node {
        Endpoint* endpoint;  // owned, for nodes learnt from the cluster
        Connection* conn;
        bool failed;  // unreachable since its last answer
    };

    // A node is known by its connection's address. nullptr when there are
    // too many (or out of memory). Takes `endpoint` (nullptr for a seed).
    Node* add_node(Endpoint* endpoint, Addresses addrs, const ngx_str_t& name, std::string_view host = {}) noexcept
    {
        const ngx_addr_t& addr = addrs.addrs[0];
        for (unsigned i = 0; i < node_count_; i++) {
            const ngx_addr_t& known = nodes_[i].conn->address();
            if (ngx_cmp_sockaddr(known.sockaddr, known.socklen, addr.sockaddr, addr.socklen, 1) == NGX_OK) {
                free_endpoint(endpoint);
                return &nodes_[i];
            }
        }
        if (node_count_ == max_nodes) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis %V has more than %ui nodes",
                          &server_.name, static_cast<ngx_uint_t>(max_nodes));
            free_endpoint(endpoint);
            return nullptr;
        }
        Node& n = nodes_[node_count_];
        n.endpoint = endpoint;
        n.conn = new (std::nothrow) Connection(name, addrs, server_.auth, log_,
                                               ConnectionOptions::cluster_node_at(tls_target(server_, host)));
        if (n.conn == nullptr) {
            free_endpoint(endpoint);
            return nullptr;
        }
        if (timeout_ != 0) {
            n.conn->set_timeout(timeout_);
        }
        node_count_++;
        return &n;
    }

    // 1-based; an empty host: the node `from`.
    unsigned node_at(std::string_view host, unsigned port, unsigned from) noexcept
    {
        char buf[NGX_SOCKADDR_STRLEN];
        if (host.empty() && from < node_count_) {
            const ngx_addr_t& addr = nodes_[from].conn->address();
            size_t len = ngx_sock_ntop(addr.sockaddr, addr.socklen, reinterpret_cast<u_char*>(buf), sizeof(buf), 0);
            host = {buf, len};
        }
        Endpoint* e = make_endpoint(host, port, log_);
        if (e == nullptr) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis %V names a node at \"%*s:%ui\" "
                          "that is not an IP address and port", &server_.name, host.size(), host.data(),
                          static_cast<ngx_uint_t>(port));
            return 0;
        }
        Node* n = add_node(e, one_address(e->addr), e->name);
        return n ? static_cast<unsigned>(n - nodes_) + 1 : 0;
    }

    // The first not resting after a failure, seeds first.
    unsigned any_node() noexcept
    {
        for (unsigned i = 0; i < node_count_; i++) {
            unsigned k = (next_any_ + i) % node_count_;
            if (!nodes_[k].conn->resting()) {
                return k + 1;
            }
        }
        return 0;
    }

    bool send(unsigned node, OwnedCommand* c) noexcept
    {
        c->target = node;
        return send_owned(*nodes_[node].conn, c, on_reply);
    }

    static void on_reply(void* data, redisReply* reply)
    {
        auto* c = static_cast<OwnedCommand*>(data);
        auto* self = static_cast<ClusterRouter*>(c->router);
        if (self->closing_) {
            finish_owned(c, nullptr);
            return;
        }
        if (reply == nullptr) {
            self->nodes_[c->target].failed = true;
            self->next_any_ = c->target + 1;
            self->request_refresh();
            finish_owned(c, nullptr);
            return;
        }
        self->nodes_[c->target].failed = false;
        if (reply->type == REDIS_REPLY_ERROR) {
            std::string_view error{reply->str, reply->len};
            if (auto redirect = parse_redirect(error)) {
                if (self->follow(*redirect, c)) {
                    return;
                }
            } else if (error.substr(0, 11) == "CLUSTERDOWN" || error.substr(0, 8) == "TRYAGAIN") {
                self->request_refresh();
            }
        }
        finish_owned(c, reply);
    }

    bool follow(const Redirect& redirect, OwnedCommand* c) noexcept
    {
        if (c->redirects++ >= max_redirects) {
            ngx_log_error(NGX_LOG_ERR, log_, 0, "idempotency: Redis %V: more than %d redirections for "
                          "slot %ui", &server_.name, max_redirects, static_cast<ngx_uint_t>(redirect.slot));
            return false;
        }
        unsigned node = node_at(redirect.host, redirect.port, c->target);
        if (node == 0) {
            return false;
        }
        if (redirect.ask) {
            // The slot is being migrated and this key is already at its
            // new node: ASKING lets the next command in, once.
            static const char* asking[] = {"ASKING"};
            static const size_t asking_len[] = {6};
            if (!nodes_[node - 1].conn->command(1, asking, asking_len, nullptr, nullptr, c->queue_while_down)) {
                return false;
            }
        } else {
            slots_[redirect.slot] = static_cast<std::uint8_t>(node);
            request_refresh();
        }
        return send(node - 1, c);
    }


    void request_refresh(ngx_msec_t delay = 1) noexcept
    {
        if (refreshing_ || refresh_timer_.event.timer_set || closing_) {
            return;
        }
        ngx_msec_t since = ngx_current_msec - last_refresh_;
        if (last_refresh_ != 0 && since < refresh_interval) {
            delay = ngx_max(delay, refresh_interval - since);
        }
        ngx_add_timer(&refresh_timer_.event, delay);
    }

    static void on_refresh_event(ngx_event_t* ev) { static_cast<ClusterRouter*>(ev->data)->refresh(); }

    // From where the last answer came, until one takes CLUSTER SLOTS.
    void refresh() noexcept
    {
        static const char* argv[] = {"CLUSTER", "SLOTS"};
        static const size_t lens[] = {7, 5};
        last_refresh_ = ngx_current_msec;
        for (unsigned i = 0; i < node_count_; i++) {
            unsigned k = (refresh_from_ + i) % node_count_;
            if (nodes_[k].conn->resting()) {
                continue;
            }
            refresh_node_ = k;
            refreshing_ = true;
            if (nodes_[k].conn->command(2, argv, lens, on_slots, this)) {
                return;
            }
            refreshing_ = false;
        }
        // Nobody to ask now; the next failure asks again.
    }

    static void on_slots(void* data, redisReply* reply)
    {
        auto* self = static_cast<ClusterRouter*>(data);
        self->refreshing_ = false;
        if (self->closing_) {
            return;
        }
        ParseState state{self, 0, 0, false};
        if (reply == nullptr || !parse_cluster_slots(reply, on_range, &state) || state.failed) {
            if (reply != nullptr) {
                ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V: node %V did not give a "
                              "slot map%s%s", &self->server_.name, &self->nodes_[self->refresh_node_].conn->name(),
                              reply->type == REDIS_REPLY_ERROR ? ": " : "",
                              reply->type == REDIS_REPLY_ERROR ? reply->str : "");
            }
            self->refresh_from_ = self->refresh_node_ + 1;
            self->request_refresh();
            return;
        }
        std::memcpy(self->slots_, self->next_slots_, sizeof(self->slots_));
        self->refresh_from_ = self->refresh_node_;
        if (state.covered != self->covered_ || state.ranges != self->ranges_) {
            ngx_log_error(NGX_LOG_INFO, self->log_, 0,
                          "idempotency: Redis %V: %ui slot ranges, %ui of 16384 slots served",
                          &self->server_.name, state.ranges, state.covered);
        }
        self->ranges_ = state.ranges;
        self->covered_ = state.covered;
        // An unreachable master stays in the map until its replica takes
        // over: look again shortly rather than wait for a request to fail.
        for (unsigned s = 0; s < cluster_slot_count; s++) {
            if (self->slots_[s] != 0 && self->nodes_[self->slots_[s] - 1].failed) {
                self->request_refresh(failover_poll);
                break;
            }
        }
    }

    struct ParseState {
        ClusterRouter* self;
        ngx_uint_t ranges;
        ngx_uint_t covered;
        bool failed;
    };

    static void on_range(void* data, const SlotRange& range)
    {
        auto* state = static_cast<ParseState*>(data);
        ClusterRouter* self = state->self;
        if (state->ranges == 0) {
            std::memset(self->next_slots_, 0, sizeof(self->next_slots_));
        }
        state->ranges++;
        unsigned node = self->node_at(range.host, range.port, self->refresh_node_);
        if (node == 0) {
            state->failed = true;
            return;
        }
        for (unsigned s = range.first; s <= range.last; s++) {
            self->next_slots_[s] = static_cast<std::uint8_t>(node);
        }
        state->covered += range.last - range.first + 1;
    }

    const RedisServer& server_;
    ngx_log_t* log_;
    ngx_msec_t timeout_ = 0;
    unsigned node_count_ = 0;
    unsigned next_any_ = 0;
    std::uint8_t slots_[cluster_slot_count]{};  // 1-based node index, 0: not known
    std::uint8_t next_slots_[cluster_slot_count]{};
    ngx_uint_t ranges_ = 0;
    ngx_uint_t covered_ = 0;
    bool refreshing_ = false;
    bool closing_ = false;
    unsigned refresh_node_ = 0;
    unsigned refresh_from_ = 0;
    ngx_msec_t last_refresh_ = 0;
    OwnedTimer refresh_timer_;
    Node nodes_[max_nodes]{};  // the first node_count_ in use
};

}  // namespace

Router* make_cluster_router(const RedisServer& server, ngx_log_t* log) noexcept
{
    return start_router<ClusterRouter>(server, log);
}

}  // namespace idem::redis
