// redis/pipeline.hpp — one connection's unsent RESP and its reply slots,
// oldest first (Redis answers in order); touches no socket. A late command
// is written only once everything before it was sent, so its words are
// chosen as it leaves (a store within its lease, lease.hpp); it may be a
// MULTI ... EXEC whose replies reach its handler as one (the last, or the
// first error). The debug trace names commands by name and key hash alone.
#pragma once

#include <cstdint>

#include "../ngx.hpp"
#include "info.hpp"

struct redisReply;

namespace idem::redis {

// Called once per command: with its reply, or nullptr when none will come.
using ReplyHandler = void (*)(void* data, redisReply* reply);

constexpr int max_late_commands = 4;
constexpr int max_late_args = 10;

// Filled in as it leaves; they point into memory that outlives the call.
struct LateWords {
    int commands = 0;
    int argc[max_late_commands];
    const char* argv[max_late_commands][max_late_args];
    std::size_t lens[max_late_commands][max_late_args];

    void add(int n, const char* const* words, const std::size_t* word_lens) noexcept;
};

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
    // `name` outlives the pipeline.
    Pipeline(const ngx_str_t& name, ngx_log_t* log) noexcept : name_(name), log_(log) {}
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // `front`: a handshake goes before what was queued while down. False when
    // out of memory.
    bool push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
              bool front) noexcept;
    bool push_late(Late late, ReplyHandler handler, void* data) noexcept;

    // Only once everything before it has been sent; false when out of memory.
    bool render_due(const ServerFeatures& features) noexcept;
    // Up to the next late command.
    u_char* unsent() const noexcept { return reinterpret_cast<u_char*>(out_ + out_pos_); }
    size_t unsent_size() const noexcept;
    void sent(size_t n) noexcept;
    void drop_unsent() noexcept;

    bool awaiting() const noexcept { return head_ != nullptr; }
    Pending* oldest() const noexcept { return head_; }
    // The caller reads it and gives it back.
    Pending* pop() noexcept;
    // The caller gives each back before running its handler, which may push again.
    Pending* take_all() noexcept;
    void give_back(Pending* p) noexcept;

private:
    bool reserve(size_t size) noexcept;
    Pending* new_slot(ReplyHandler handler, void* data) noexcept;
    void link(Pending* p, bool front) noexcept;
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
