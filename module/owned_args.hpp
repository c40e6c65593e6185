// owned_args.hpp — the one way the module keeps copies of a command's
// arguments: an object and the bytes of its arguments in one allocation,
// the object's `args` viewing them. A claim in flight (store.hpp), a fenced
// script call (redis/script_calls.hpp) and a routed command
// (redis/router.hpp) each outlive the buffers they were made from: they
// are answered, sent again or released after their request may be gone.
// A script call storing a response keeps the record's bytes themselves
// instead of a copy when it was handed them (record_bytes.hpp).
#pragma once

#include <cstring>
#include <new>
#include <string_view>

#include "ngx.hpp"

namespace idem {

template <int N>
struct OwnedArgs {
    static constexpr int capacity = N;
    int count = 0;
    const char* arg[N]{};
    size_t len[N]{};

    std::string_view operator[](int i) const noexcept { return {arg[i], len[i]}; }
};

// A value-initialised T followed by copies of `args` (at most
// T::args.capacity of them), freed with delete_with_args (or ngx_free, for
// a T with nothing to destroy); nullptr when out of memory.
template <typename T>
T* new_with_args(const std::string_view* args, int count, ngx_log_t* log) noexcept
{
    if (count > decltype(T::args)::capacity) {
        return nullptr;
    }
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        total += args[i].size();
    }
    void* memory = ngx_alloc(sizeof(T) + total, log);
    if (memory == nullptr) {
        return nullptr;
    }
    T* t = new (memory) T{};
    char* p = static_cast<char*>(memory) + sizeof(T);
    for (int i = 0; i < count; i++) {
        t->args.arg[i] = p;
        t->args.len[i] = args[i].size();
        if (!args[i].empty()) {
            std::memcpy(p, args[i].data(), args[i].size());
        }
        p += args[i].size();
    }
    t->args.count = count;
    return t;
}

template <typename T>
void delete_with_args(T* t) noexcept
{
    t->~T();
    ngx_free(t);
}

}  // namespace idem
