// redis/pipeline.hpp — what one connection owes and is owed: the commands
// written in RESP and not sent yet, and one reply slot per command sent or
// queued, oldest first (Redis answers in order). Reply slots are recycled
// through a free list; nothing here touches a socket. Each command written
// is traced at debug level by its name and key hash alone (resp.hpp).
// A late command (Late) is written only when everything queued before it
// has been sent: its words are chosen then, at the moment it leaves, not
// when it was queued (a store within its claim's lease, lease.hpp). It
// may be several commands (a MULTI ... EXEC) whose replies come to its one
// handler as one: the last, or the first error among them. It is told what
// the server it leaves for runs (info.hpp: its conditional writes).
#pragma once

#include <cstdint>

#include "../ngx.hpp"
#include "info.hpp"

struct redisReply;

namespace idem::redis {

// Called once per command: with its reply, or with nullptr when no reply
// will come (connection lost, timed out, worker exiting).
using ReplyHandler = void (*)(void* data, redisReply* reply);

constexpr int max_late_commands = 4;
constexpr int max_late_args = 10;

// The words of a late command, filled in by its Render as it leaves; they
// point into memory that outlives the call.
struct LateWords {
    int commands = 0;
    int argc[max_late_commands];
    const char* argv[max_late_commands][max_late_args];
    std::size_t lens[max_late_commands][max_late_args];

    void add(int n, const char* const* words, const std::size_t* word_lens) noexcept;
};

// Fills in at least one command, for a server that runs `features`.
using Render = void (*)(void* data, const ServerFeatures& features, LateWords& out);

struct Late {
    Render render = nullptr;  // nullptr: an ordinary command
    void* data = nullptr;
};

struct Pending {
    Pending* next;
    ReplyHandler handler;
    void* data;
    std::uint64_t queued_us;  // for the round-trip histogram
    Late late;                // not written yet while late.render is set
    std::uint64_t at;         // late: where in the byte stream it goes
    Pending* next_late;
    unsigned more;            // replies that come before the one handed over
    redisReply* error;        // the first error among them, handed over instead
};

class Pipeline {
public:
    // `name`: the connection's, for the debug trace; it outlives the pipeline.
    Pipeline(const ngx_str_t& name, ngx_log_t* log) noexcept : name_(name), log_(log) {}
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // Writes a command and links its reply slot: at the back, or at the
    // front (a connection's handshake goes before what was queued while it
    // was down). False when out of memory.
    bool push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
              bool front) noexcept;
    // Links the reply slot of a late command at the back; false when out of memory.
    bool push_late(Late late, ReplyHandler handler, void* data) noexcept;

    // Writes the late command that is next to leave, if everything before
    // it has been sent, for a server that runs `features`; false when out
    // of memory.
    bool render_due(const ServerFeatures& features) noexcept;
    // The bytes that may leave now (up to the next late command); sent(n)
    // when n of them left.
    u_char* unsent() const noexcept { return reinterpret_cast<u_char*>(out_ + out_pos_); }
    size_t unsent_size() const noexcept;
    void sent(size_t n) noexcept;
    void drop_unsent() noexcept;

    bool awaiting() const noexcept { return head_ != nullptr; }
    Pending* oldest() const noexcept { return head_; }
    // The oldest slot, unlinked; the caller reads it and gives it back.
    Pending* pop() noexcept;
    // Every slot, unlinked as one chain (the connection is lost); the caller
    // gives each back before running its handler, which may push again.
    Pending* take_all() noexcept;
    void give_back(Pending* p) noexcept;

private:
    bool reserve(size_t size) noexcept;
    Pending* new_slot(ReplyHandler handler, void* data) noexcept;
    void link(Pending* p, bool front) noexcept;
    // Writes `size` bytes at the send position, ahead of what waits.
    char* insert_at_front(size_t size) noexcept;

    const ngx_str_t& name_;
    ngx_log_t* log_;
    char* out_ = nullptr;  // RESP bytes: [out_pos_, out_len_) not sent yet, room for out_cap_
    size_t out_pos_ = 0, out_len_ = 0, out_cap_ = 0;
    std::uint64_t base_ = 0;  // where out_[0] is in the byte stream
    Pending* late_head_ = nullptr;  // late commands not written yet, oldest first
    Pending* late_tail_ = nullptr;
    Pending* head_ = nullptr;  // awaiting replies, oldest first
    Pending* tail_ = nullptr;
    Pending* free_ = nullptr;  // recycled slots
};

}  // namespace idem::redis
