// redis/redis_store.cpp — see redis_store.hpp.

#include "redis_store.hpp"

#include <utility>

#include "replies.hpp"
#include "scripts.hpp"

namespace idem::redis {
namespace {

constexpr std::uint64_t default_lock_ttl_ms = 30000;  // idempotency_lock_ttl's default

}  // namespace

PendingOp* RedisStore::claim(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms,
                             const ClaimWaiter& waiter) noexcept
{
    PendingOp* op = new_pending(this, key, claim, lock_ttl_ms, waiter, log_);
    if (op == nullptr) {
        return nullptr;
    }
    note_lock_ttl(lock_ttl_ms);
    std::string_view ttl = lock_ttl_text_.of(lock_ttl_ms);
    bool sent;
    if (waiter.fence) {
        // sent whole (EVAL): Redis keeps it compiled
        const char* argv[] = {"EVAL", fenced_claim_script.data(), "1", op->args.arg[0], op->args.arg[1], ttl.data()};
        const size_t lens[] = {4, fenced_claim_script.size(), 1, key.size(), claim.size(), ttl.size()};
        sent = router_->command(key, 6, argv, lens, on_claim_reply, op);
    } else {
        const char* argv[] = {"SET", op->args.arg[0], op->args.arg[1], "NX", "PX", ttl.data(), "GET"};
        const size_t lens[] = {3, key.size(), claim.size(), 2, 2, ttl.size(), 3};
        sent = router_->command(key, 7, argv, lens, on_claim_reply, op);
    }
    if (!sent) {
        ngx_free(op);
        return nullptr;
    }
    return op;
}

// Within the lease, the first attempt goes as the leased transaction: plain
// commands, no script; later ones, and one past the lease, as the script.
void RedisStore::complete(std::string_view key, std::string_view claim, RecordBytes record, std::string_view marker,
                          std::uint64_t ttl_ms, std::uint64_t lock_ttl_ms, Lease* lease, StoreNotice notice) noexcept
{
    calls_.store(key, claim, std::move(record), marker, ttl_ms, lock_ttl_or_longest(lock_ttl_ms), lease, notice);
    Connection::send_queued();  // before the response's end goes on to the client
}

void RedisStore::release(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms) noexcept
{
    std::string_view args[] = {key, claim};
    calls_.call(release_script, Role::release, args, 2, lock_ttl_or_longest(lock_ttl_ms));
    Connection::send_queued();  // before the answer that released it goes on to the client
}

void RedisStore::renew(std::string_view key, std::string_view claim, std::uint64_t lock_ttl_ms, Lease* lease) noexcept
{
    note_lock_ttl(lock_ttl_ms);
    calls_.renew(key, claim, lock_ttl_ms, Role::renewal, lease);
}

void RedisStore::note_lock_ttl(std::uint64_t lock_ttl_ms) noexcept
{
    if (lock_ttl_ms > longest_lock_ttl_) {
        longest_lock_ttl_ = lock_ttl_ms;
    }
}

// lock_ttl_ms 0 (its request gone): the longest used, else the default.
std::uint64_t RedisStore::lock_ttl_or_longest(std::uint64_t lock_ttl_ms) const noexcept
{
    if (lock_ttl_ms != 0) {
        return lock_ttl_ms;
    }
    return longest_lock_ttl_ != 0 ? longest_lock_ttl_ : default_lock_ttl_ms;
}

// A claim nobody waits for any more is released.
void RedisStore::on_claim_reply(void* data, redisReply* reply)
{
    auto* op = static_cast<PendingOp*>(data);
    auto* self = static_cast<RedisStore*>(op->store);
    std::string_view found;
    std::uint64_t fence = 0;
    ClaimReply kind = op->waiter.fence ? read_fenced_claim_reply(reply, found, fence) : read_claim_reply(reply, found);
    bool lost = reply == nullptr;

    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        ngx_log_error(NGX_LOG_ERR, self->log_, 0, "idempotency: Redis %V refused the claim: %s",
                      &self->server_.name, reply->str);
    }
    if (self->closing_) {
        // Worker exit: nobody is answered; a claim that may have been
        // granted expires within its lock_ttl.
        ngx_free(op);
        return;
    }
    const ClaimWaiter& waiter = op->waiter;
    if (waiter.callback != nullptr) {
        // Also while exiting gracefully: the request still holds the operation.
        if (kind == ClaimReply::found) {
            // the request may keep the string: the reply lets go of it
            waiter.answer_found(op->key(), RecordBytes::owned(std::exchange(reply->str, nullptr), found), self->log_);
        } else if (kind == ClaimReply::granted) {
            waiter.granted(fence);
        } else {
            waiter.answer(Outcome::unavailable);
        }
        if (lost) {
            self->release(op->key(), op->claim(), op->lock_ttl_ms);  // it may have been granted: free it once Redis answers
        }
    } else if (lost || kind == ClaimReply::granted) {
        // Nobody waits for this claim any more, and it may be ours.
        ngx_log_error(NGX_LOG_INFO, self->log_, 0, "idempotency: releasing a claim whose requester stopped waiting");
        self->release(op->key(), op->claim(), op->lock_ttl_ms);
    }
    ngx_free(op);
}

}  // namespace idem::redis
