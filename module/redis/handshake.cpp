// redis/handshake.cpp — what a Connection sends first on every new connection.

#include <hiredis/hiredis.h>

#include "../conf.hpp"
#include "connection.hpp"
#include "info.hpp"
#include "scripts.hpp"

namespace idem::redis {

// AUTH and SELECT go first, pipelined with what was queued; either failing
// closes the connection. On a data node INFO server (which conditional
// writes it runs; commands leaving before the answer go without them) and
// INFO memory (warn once per connection unless noeviction) follow, then the
// scripts are loaded.
bool Connection::handshake() noexcept
{
    // pushed to the front in reverse: AUTH, then SELECT, then INFO go out
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, log_, 0, "idempotency: Redis %V: handshake:%s%s%s", &name_,
                   auth_.password.len ? " AUTH" : "", auth_.db != 0 ? " SELECT" : "",
                   data_node_ ? " INFO server, INFO memory" : "");
    if (data_node_ && !load_scripts()) {
        return false;
    }
    if (data_node_) {
        const char* memory[] = {"INFO", "memory"};
        const char* server[] = {"INFO", "server"};
        const size_t lens[] = {4, 6};
        if (!pipeline_.push(2, memory, lens, on_memory_info, this, true)
            || !pipeline_.push(2, server, lens, on_server_info, this, true)) {
            return false;
        }
    }
    if (auth_.db != 0) {
        char db[NGX_INT_T_LEN];
        size_t db_len = static_cast<size_t>(ngx_sprintf(reinterpret_cast<u_char*>(db), "%i", auth_.db) - reinterpret_cast<u_char*>(db));
        const char* argv[] = {"SELECT", db};
        const size_t lens[] = {6, db_len};
        if (!pipeline_.push(2, argv, lens, on_handshake_reply, this, true)) {
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
        if (!pipeline_.push(argc, argv, lens, on_handshake_reply, this, true)) {
            return false;
        }
    }
    return true;
}

// Loaded ahead of every command, so a store or release by EVALSHA does not
// meet NOSCRIPT and resend as EVAL after its answer went to the client: a
// retry sent at once would find the claim still there
// (docs/design.md#settled-before-answered). Refused (an ACL without SCRIPT
// LOAD), each script's first EVALSHA loads it.
bool Connection::load_scripts() noexcept
{
    for (Script* script : {&restore_script, &renew_script, &release_script, &complete_script}) {
        const char* argv[] = {"SCRIPT", "LOAD", script->body.data()};
        const size_t lens[] = {6, 4, script->body.size()};
        if (!pipeline_.push(3, argv, lens, on_script_loaded, this, true)) {
            return false;
        }
    }
    return true;
}

void Connection::on_script_loaded(void* data, redisReply* reply)
{
    [[maybe_unused]] auto* self = static_cast<Connection*>(data);  // read by the debug log alone
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, self->log_, 0, "idempotency: Redis %V: script %s", &self->name_,
                   reply == nullptr ? "load lost with the connection"
                   : reply->type == REDIS_REPLY_ERROR ? "load refused" : "loaded");
}

bool Connection::handshake_step(ReplyHandler handler) noexcept
{
    return handler == on_handshake_reply || handler == on_memory_info || handler == on_server_info
           || handler == on_script_loaded;
}

void Connection::on_handshake_reply(void* data, redisReply* reply)
{
    auto* self = static_cast<Connection*>(data);
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the handshake: %s",
                      &self->name_, reply->str);
        self->fail(nullptr, 0);
        return;
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, self->log_, 0, "idempotency: Redis %V: handshake step %s", &self->name_,
                   reply != nullptr ? "accepted" : "lost with the connection");
}

void Connection::on_server_info(void* data, redisReply* reply)
{
    auto* self = static_cast<Connection*>(data);
    if (reply == nullptr || reply->type != REDIS_REPLY_STRING) {
        return;  // lost with the connection, or INFO refused: no conditional writes assumed
    }
    self->features_ = server_features({reply->str, reply->len});
    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, self->log_, 0, "idempotency: Redis %V: conditional writes: SET IFEQ %s, %s",
                   &self->name_, self->features_.set_ifeq ? "yes" : "no",
                   self->features_.del == ConditionalDelete::delifeq      ? "DELIFEQ"
                   : self->features_.del == ConditionalDelete::delex_ifeq ? "DELEX IFEQ"
                                                                           : "no conditional delete");
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

}  // namespace idem::redis
