// owned_args.hpp — an object and copies of a command's arguments in one
// allocation, for what outlives the buffers it was made from (a claim in
// flight, a script call, a routed command: answered, resent or released
// after their request may be gone).
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

// At most T::args.capacity args; freed with delete_with_args (or ngx_free
// for a trivially destructible T); nullptr when out of memory.
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
