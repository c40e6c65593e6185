// redis/pipeline.cpp — see pipeline.hpp.

#include "pipeline.hpp"

#include <cstring>

#include "../metrics.hpp"
#include "resp.hpp"

namespace idem::redis {

Pipeline::~Pipeline()
{
    while (free_ != nullptr) {
        Pending* p = free_;
        free_ = p->next;
        ngx_free(p);
    }
    ngx_free(out_);
}

// Makes room for `size` more bytes at out_ + out_len_.
bool Pipeline::reserve(size_t size) noexcept
{
    if (out_pos_ > 0 && out_pos_ == out_len_) {
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
    out_pos_ = 0;
    out_len_ = waiting;
    return true;
}

void Pipeline::sent(size_t n) noexcept
{
    out_pos_ += n;
    if (out_pos_ == out_len_) {
        out_pos_ = out_len_ = 0;
    }
}

void Pipeline::give_back(Pending* p) noexcept
{
    if (p != nullptr) {
        p->next = free_;
        free_ = p;
    }
}

bool Pipeline::push(int argc, const char** argv, const size_t* argv_len, ReplyHandler handler, void* data,
                    bool front) noexcept
{
    Pending* p = free_;
    if (p != nullptr) {
        free_ = p->next;
    } else {
        p = static_cast<Pending*>(ngx_alloc(sizeof(Pending), log_));
    }
    // At the back the command is written into room for at least its size;
    // at the front, what waits moves by its exact size.
    size_t size = front ? resp_size(argc, argv_len) : resp_size_bound(argc, argv_len);
    if (p == nullptr || !reserve(size)) {
        give_back(p);
        return false;
    }
    if (front) {
        char* at = out_ + out_pos_;
        std::memmove(at + size, at, out_len_ - out_pos_);
        resp_write(at, argc, argv, argv_len);
        out_len_ += size;
    } else {
        out_len_ = static_cast<size_t>(resp_write(out_ + out_len_, argc, argv, argv_len) - out_);
    }
    p->handler = handler;
    p->data = data;
    p->queued_us = monotonic_us();
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
