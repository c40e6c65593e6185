// redis/redis_live.cpp — see redis_store.hpp: live logs and pieces, plain
// commands but for two short scripts.

#include "redis_store.hpp"

#include "pieces.hpp"
#include "retry.hpp"
#include "scripts.hpp"

namespace idem::redis {

// `SET L bytes PX ttl` first, then `APPEND L bytes`, whose new length says
// whether it landed where it was to go. A read that may find the log gone is
// a short script sent whole (EVAL: Redis keeps it compiled, no NOSCRIPT round).
LiveOp* RedisStore::live_append(std::string_view key, std::uint64_t at, std::string_view bytes, std::uint64_t ttl_ms,
                                LiveCallback callback, void* data, LiveKind) noexcept
{
    // the bytes are not kept: the pipeline holds the command until written,
    // a Cluster or Sentinel router its own copy for a redirection
    LiveOp* op = new_live_op(this, key, {}, callback, data, log_);
    if (op == nullptr) {
        return nullptr;
    }
    op->append = true;
    op->at = at + bytes.size();  // the length the log has once the append landed
    if (at == 0) {
        char ttl[NGX_INT64_LEN];
        size_t ttl_len = decimal(ttl_ms, ttl);
        const char* argv[] = {"SET", op->args.arg[0], bytes.data(), "PX", ttl, "NX"};
        const size_t lens[] = {3, key.size(), bytes.size(), 2, ttl_len, 2};
        return send_live(op, key, 6, argv, lens);
    }
    const char* argv[] = {"APPEND", op->args.arg[0], bytes.data()};
    const size_t lens[] = {6, key.size(), bytes.size()};
    return send_live(op, key, 3, argv, lens);
}

LiveOp* RedisStore::live_read(std::string_view key, std::uint64_t at, bool may_be_gone, LiveCallback callback,
                              void* data) noexcept
{
    LiveOp* op = new_live_op(this, key, {}, callback, data, log_);
    if (op == nullptr) {
        return nullptr;
    }
    op->may_be_gone = may_be_gone;
    char at_text[NGX_INT64_LEN];
    size_t at_len = decimal(at, at_text);
    if (may_be_gone) {
        const char* argv[] = {"EVAL", live_read_script.data(), "1", op->args.arg[0], at_text};
        const size_t lens[] = {4, live_read_script.size(), 1, key.size(), at_len};
        return send_live(op, key, 5, argv, lens);
    }
    const char* argv[] = {"GETRANGE", op->args.arg[0], at_text, "-1"};
    const size_t lens[] = {8, key.size(), at_len, 2};
    return send_live(op, key, 4, argv, lens);
}

void RedisStore::live_expire(std::string_view key, std::uint64_t ttl_ms) noexcept
{
    char ttl[NGX_INT64_LEN];
    size_t ttl_len = decimal(ttl_ms, ttl);
    const char* argv[] = {ttl_ms != 0 ? "PEXPIRE" : "DEL", key.data(), ttl};
    const size_t lens[] = {ttl_ms != 0 ? size_t{7} : size_t{3}, key.size(), ttl_len};
    router_->command(key, ttl_ms != 0 ? 3 : 2, argv, lens, on_ignored_reply, nullptr);
}

// The others share the first piece's slot.
LiveOp* RedisStore::pieces_look(std::string_view base, std::uint32_t count, LiveCallback callback,
                                void* data) noexcept
{
    char first[max_piece_key_size];
    std::size_t first_size = write_piece_key(base, 0, first);
    LiveOp* op = new_live_op(this, {first, first_size}, {}, callback, data, log_);
    if (op == nullptr || count == 0) {
        ngx_free(op);
        return nullptr;
    }
    op->look = true;
    op->at = count;
    char count_text[NGX_INT64_LEN];
    char name_text[NGX_INT64_LEN];
    const char* argv[] = {"EVAL", pieces_look_script.data(), "1", op->args.arg[0], count_text, name_text};
    const size_t lens[] = {4, pieces_look_script.size(), 1, first_size, decimal(count, count_text),
                           decimal(piece_name_size, name_text)};
    return send_live(op, {first, first_size}, 6, argv, lens);
}

LiveOp* RedisStore::send_live(LiveOp* op, std::string_view key, int argc, const char** argv,
                              const size_t* lens) noexcept
{
    if (!router_->command(key, argc, argv, lens, on_live_reply, op)) {
        ngx_free(op);
        return nullptr;
    }
    return op;
}

void RedisStore::on_live_reply(void* data, redisReply* reply)
{
    auto* op = static_cast<LiveOp*>(data);
    auto* self = static_cast<RedisStore*>(op->store);
    if (op->callback != nullptr && !self->closing_) {
        LiveStatus status = LiveStatus::failed;
        std::string_view bytes;
        if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
            if (reply != nullptr) {
                ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused a live log's %s: %s",
                              &self->server_.name, op->append ? "append" : "read", reply->str);
            }
            // no answer, or "not now": sent again, it may land
            status = !reply || is_transient_error({reply->str, reply->len}) ? LiveStatus::lost : LiveStatus::failed;
        } else if (op->look) {
            status = read_look(op, reply, bytes) ? LiveStatus::done : LiveStatus::failed;
        } else if (op->append) {
            // SET ... NX: OK, or nil when a log was there; APPEND: the new length
            bool landed = reply->type == REDIS_REPLY_STATUS
                          || (reply->type == REDIS_REPLY_INTEGER
                              && static_cast<std::uint64_t>(reply->integer) == op->at);
            status = landed ? LiveStatus::done : LiveStatus::gone;
        } else if (reply->type == REDIS_REPLY_STRING) {
            status = LiveStatus::done;
            bytes = {reply->str, reply->len};
        } else {
            status = LiveStatus::gone;  // nil: no such log
        }
        op->callback(op->data, status, bytes);
    }
    ngx_free(op);
}

bool RedisStore::read_look(const LiveOp* op, const redisReply* reply, std::string_view& out) noexcept
{
    if (reply->type != REDIS_REPLY_STRING || reply->len != op->at * piece_look_entry_size) {
        return false;
    }
    out = {reply->str, reply->len};
    return true;
}

}  // namespace idem::redis
