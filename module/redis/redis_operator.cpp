// redis/redis_operator.cpp — see redis_store.hpp: the operator's plane,
// short scripts sent whole (EVAL, scripts.cpp) to the key's node like every
// other command.

#include "redis_store.hpp"

#include "scripts.hpp"

namespace idem::redis {

PeekOp* RedisStore::peek(std::string_view key, PeekCallback callback, void* data) noexcept
{
    PeekOp* op = new_peek_op(this, key, {}, false, callback, data, log_);
    if (op == nullptr) {
        return nullptr;
    }
    const char* argv[] = {"EVAL", peek_script.data(), "1", op->args.arg[0]};
    const size_t lens[] = {4, peek_script.size(), 1, key.size()};
    return send_peek(op, key, 4, argv, lens);
}

PeekOp* RedisStore::purge(std::string_view key, std::string_view expected, PeekCallback callback,
                          void* data) noexcept
{
    PeekOp* op = new_peek_op(this, key, expected, true, callback, data, log_);
    if (op == nullptr) {
        return nullptr;
    }
    const char* argv[] = {"EVAL", purge_script.data(), "1", op->args.arg[0], op->args.arg[1]};
    const size_t lens[] = {4, purge_script.size(), 1, key.size(), expected.size()};
    return send_peek(op, key, 5, argv, lens);
}

PeekOp* RedisStore::send_peek(PeekOp* op, std::string_view key, int argc, const char** argv,
                              const size_t* lens) noexcept
{
    if (!router_->command(key, argc, argv, lens, on_peek_reply, op)) {
        ngx_free(op);
        return nullptr;
    }
    return op;
}

void RedisStore::on_peek_reply(void* data, redisReply* reply)
{
    auto* op = static_cast<PeekOp*>(data);
    auto* self = static_cast<RedisStore*>(op->store);
    if (op->callback != nullptr && !self->closing_) {
        LiveStatus status = LiveStatus::failed;
        std::string_view value;
        std::int64_t ttl = -1;
        if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
            ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the operator's %s: %s",
                          &self->server_.name, op->purge ? "purge" : "peek", reply->str);
        } else if (reply == nullptr) {
            // no reply: failed
        } else if (op->purge) {
            if (reply->type == REDIS_REPLY_INTEGER) {
                status = reply->integer == 1 ? LiveStatus::done : LiveStatus::gone;
            }
        } else if (reply->type == REDIS_REPLY_NIL) {
            status = LiveStatus::gone;
        } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2
                   && reply->element[0]->type == REDIS_REPLY_STRING
                   && reply->element[1]->type == REDIS_REPLY_INTEGER) {
            status = LiveStatus::done;
            value = {reply->element[0]->str, reply->element[0]->len};
            ttl = reply->element[1]->integer >= 0 ? reply->element[1]->integer : -1;
        }
        op->callback(op->data, status, value, ttl);
    }
    ngx_free(op);
}

}  // namespace idem::redis
