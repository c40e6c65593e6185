// redis/pipeline.cpp — see pipeline.hpp.

#include "pipeline.hpp"

#include <cstring>

#include "../metrics.hpp"
#include "resp.hpp"

namespace idem::redis {
namespace {

// Its name and the start of its store key's hash, nothing else (resp.hpp).
void trace_written(const ngx_str_t& name, ngx_log_t* log, int argc, const char* const* argv, const size_t* argv_len,
                   const char* how) noexcept
{
#if (NGX_DEBUG)
    if ((log->log_level & NGX_LOG_DEBUG_HTTP) == 0) {
        return;
    }
    CommandTrace t = trace_command(argc, argv, argv_len);
    if (t.key_hash.empty()) {
        ngx_log_debug4(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: Redis %V: command %*s written%s", &name,
                       t.name.size(), t.name.data(), how);
    } else {
        ngx_log_debug6(NGX_LOG_DEBUG_HTTP, log, 0, "idempotency: Redis %V: command %*s written for key hash %*s...%s",
                       &name, t.name.size(), t.name.data(), t.key_hash.size(), t.key_hash.data(), how);
    }
#else
    (void) name, (void) log, (void) argc, (void) argv, (void) argv_len, (void) how;
#endif
}

}  // namespace

Pipeline::~Pipeline()
{
    while (free_ != nullptr) {
        Pending* p = free_;
        free_ = p->next;
        ngx_free(p);
    }
    ngx_free(out_);
}

void LateWords::add(int n, const char* const* words, const std::size_t* word_lens) noexcept
{
    if (commands >= max_late_commands || n > max_late_args) {
        return;
    }
    argc[commands] = n;
    for (int i = 0; i < n; i++) {
        argv[commands][i] = words[i];
        lens[commands][i] = word_lens[i];
    }
    commands++;
}

bool Pipeline::reserve(size_t size) noexcept
{
    if (out_pos_ > 0 && out_pos_ == out_len_) {
        base_ += out_len_;
        out_pos_ = out_len_ = 0;
    }
    if (out_len_ + size <= out_cap_) {
        return true;
    }
    size_t waiting = out_len_ - out_pos_;
    size_t cap = out_cap_ ? out_cap_ : 4096;
    while (cap < waiting + size) {
        cap *= 2;
    }
    auto* grown = static_cast<char*>(ngx_alloc(cap, log_));
    if (grown == nullptr) {
        return false;
    }
    if (waiting) {
        std::memcpy(grown, out_ + out_pos_, waiting);
    }
    ngx_free(out_);
    out_ = grown;
    out_cap_ = cap;
    base_ += out_pos_;
    out_pos_ = 0;
    out_len_ = waiting;
    return true;
}

size_t Pipeline::unsent_size() const noexcept
{
    size_t size = out_len_ - out_pos_;
    if (late_head_ != nullptr) {
        size = ngx_min(size, static_cast<size_t>(late_head_->at - (base_ + out_pos_)));
    }
    return size;
}

void Pipeline::sent(size_t n) noexcept
{
    out_pos_ += n;
    if (out_pos_ == out_len_) {
        base_ += out_len_;
        out_pos_ = out_len_ = 0;
    }
}

void Pipeline::drop_unsent() noexcept
{
    // The late commands' slots stay linked: the connection fails them all.
    late_head_ = late_tail_ = nullptr;
    base_ += out_len_;
    out_pos_ = out_len_ = 0;
}

void Pipeline::give_back(Pending* p) noexcept
{
    if (p != nullptr) {
        p->next = free_;
        free_ = p;
    }
}

Pending* Pipeline::new_slot(ReplyHandler handler, void* data) noexcept
{
    Pending* p = free_;
    if (p != nullptr) {
        free_ = p->next;
    } else {
        p = static_cast<Pending*>(ngx_alloc(sizeof(Pending), log_));
    }
    if (p != nullptr) {
        *p = Pending{};
        p->handler = handler;
        p->data = data;
        p->queued_us = monotonic_us();
    }
    return p;
}

void Pipeline::link(Pending* p, bool front) noexcept
{
    if (front) {
        p->next = head_;
        head_ = p;
        if (tail_ == nullptr) {
            tail_ = p;
        }
    } else {
        p->next = nullptr;
        (tail_ ? tail_->next : head_) = p;
        tail_ = p;
    }
    count(Counter::redis_commands);
}

char* Pipeline::insert_at_front(size_t size) noexcept
{
    if (!reserve(size)) {
        return nullptr;
    }
    char* at = out_ + out_pos_;
    if (out_len_ > out_pos_) {
        std::memmove(at + size, at, out_len_ - out_pos_);
    }
    out_len_ += size;
    for (Pending* l = late_head_; l != nullptr; l = l->next_late) {
        l->at += size;  // every late command not written yet goes after what is inserted
    }
    return at;
}

bool Pipeline::push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
                    bool front) noexcept
{
    Pending* p = new_slot(handler, data);
    if (p == nullptr) {
        return false;
    }
    // At the back the command is written into room for at least its size;
    // at the front, what waits moves by its exact size.
    if (front) {
        char* at = insert_at_front(resp_size(argc, argv_len));
        if (at == nullptr) {
            give_back(p);
            return false;
        }
        resp_write(at, argc, argv, argv_len);
        trace_written(name_, log_, argc, argv, argv_len, ", first in line");
    } else {
        if (!reserve(resp_size_bound(argc, argv_len))) {
            give_back(p);
            return false;
        }
        out_len_ = static_cast<size_t>(resp_write(out_ + out_len_, argc, argv, argv_len) - out_);
        trace_written(name_, log_, argc, argv, argv_len, "");
    }
    link(p, front);
    return true;
}

bool Pipeline::push_late(Late late, ReplyHandler handler, void* data) noexcept
{
    Pending* p = new_slot(handler, data);
    if (p == nullptr) {
        return false;
    }
    p->late = late;
    p->at = base_ + out_len_;
    (late_tail_ ? late_tail_->next_late : late_head_) = p;
    late_tail_ = p;
    link(p, false);
    return true;
}

bool Pipeline::render_due(const ServerFeatures& features) noexcept
{
    Pending* p = late_head_;
    if (p == nullptr || p->at != base_ + out_pos_) {
        return true;  // none, or something queued before it has not left yet
    }
    LateWords words;
    p->late.render(p->late.data, features, words);
    // Where nothing waits behind it (the usual case) it is written at the end
    // into room for at least its size; else what waits moves by its exact size.
    bool behind = out_len_ > out_pos_;
    size_t size = 0;
    for (int i = 0; i < words.commands; i++) {
        size += behind ? resp_size(words.argc[i], words.lens[i]) : resp_size_bound(words.argc[i], words.lens[i]);
    }
    late_head_ = p->next_late;
    if (late_head_ == nullptr) {
        late_tail_ = nullptr;
    }
    p->late = Late{};
    p->more = words.commands > 0 ? static_cast<unsigned>(words.commands - 1) : 0;
    char* at = behind ? insert_at_front(size) : reserve(size) ? out_ + out_len_ : nullptr;
    if (at == nullptr) {
        return false;
    }
    char* start = at;
    for (int i = 0; i < words.commands; i++) {
        at = resp_write(at, words.argc[i], words.argv[i], words.lens[i]);
        trace_written(name_, log_, words.argc[i], words.argv[i], words.lens[i], " as it leaves");
    }
    if (!behind) {
        size_t written = static_cast<size_t>(at - start);
        out_len_ += written;
        for (Pending* l = late_head_; l != nullptr; l = l->next_late) {
            l->at += written;  // as insert_at_front does
        }
    }
    return true;
}

Pending* Pipeline::pop() noexcept
{
    Pending* p = head_;
    if (p != nullptr) {
        head_ = p->next;
        if (head_ == nullptr) {
            tail_ = nullptr;
        }
    }
    return p;
}

Pending* Pipeline::take_all() noexcept
{
    Pending* p = head_;
    head_ = tail_ = nullptr;
    return p;
}

}  // namespace idem::redis
