// redis/pipeline.hpp — what one connection owes and is owed: the commands
// written in RESP and not sent yet, and one reply slot per command sent or
// queued, oldest first (Redis answers in order). Reply slots are recycled
// through a free list; nothing here touches a socket.
#pragma once

#include <cstdint>

#include "../ngx.hpp"

struct redisReply;

namespace idem::redis {

// Called once per command: with its reply, or with nullptr when no reply
// will come (connection lost, timed out, worker exiting).
using ReplyHandler = void (*)(void* data, redisReply* reply);

struct Pending {
    Pending* next;
    ReplyHandler handler;
    void* data;
    std::uint64_t queued_us;  // for the round-trip histogram
};

class Pipeline {
public:
    explicit Pipeline(ngx_log_t* log) noexcept : log_(log) {}
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // Writes a command and links its reply slot: at the back, or at the
    // front (a connection's handshake goes before what was queued while it
    // was down). False when out of memory.
    bool push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
              bool front) noexcept;

    // The bytes not sent yet; sent(n) when n of them left.
    u_char* unsent() const noexcept { return reinterpret_cast<u_char*>(out_ + out_pos_); }
    size_t unsent_size() const noexcept { return out_len_ - out_pos_; }
    void sent(size_t n) noexcept;
    void drop_unsent() noexcept { out_pos_ = out_len_ = 0; }

    bool awaiting() const noexcept { return head_ != nullptr; }
    // The oldest slot, unlinked; the caller reads it and gives it back.
    Pending* pop() noexcept;
    // Every slot, unlinked as one chain (the connection is lost); the caller
    // gives each back before running its handler, which may push again.
    Pending* take_all() noexcept;
    void give_back(Pending* p) noexcept;

private:
    bool reserve(size_t size) noexcept;

    ngx_log_t* log_;
    char* out_ = nullptr;  // RESP bytes: [out_pos_, out_len_) not sent yet, room for out_cap_
    size_t out_pos_ = 0, out_len_ = 0, out_cap_ = 0;
    Pending* head_ = nullptr;  // awaiting replies, oldest first
    Pending* tail_ = nullptr;
    Pending* free_ = nullptr;  // recycled slots
};

}  // namespace idem::redis
