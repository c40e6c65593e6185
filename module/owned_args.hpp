// owned_args.hpp — the one way the module keeps copies of a command's
// arguments: an object and the bytes of its arguments in one allocation,
// the object's `args` viewing them. A claim in flight (store.hpp), a fenced
// script call (redis/redis_store.cpp) and a routed command
// (redis/router.hpp) each outlive the buffers they were made from: they
// are answered, sent again or released after their request may be gone.
#pragma once

#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

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
// T::args.capacity of them), freed with ngx_free; nullptr when out of memory.
template <typename T>
T* new_with_args(const std::string_view* args, int count, ngx_log_t* log) noexcept
{
    static_assert(std::is_trivially_destructible_v<T>, "freed with ngx_free");
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

}  // namespace idem
