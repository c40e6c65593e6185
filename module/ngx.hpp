// ngx.hpp — nginx's C headers, behind extern "C". The only place the module
// crosses the C/C++ boundary in that direction.
#pragma once

#if __cplusplus < 201703L
#error "ngx_http_idempotency_module needs C++17 (g++ 11 or later compiles it by default)"
#endif

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_event_connect.h>
#include <ngx_http.h>
}

#include <string_view>

namespace idem {

inline std::string_view view(const ngx_str_t& s) noexcept
{
    return {reinterpret_cast<const char*>(s.data), s.len};
}

// Readies an event the module posts or uses as a timer. A cancelable timer
// does not keep an exiting worker alive.
inline void set_event(ngx_event_t& ev, ngx_event_handler_pt handler, void* data, ngx_log_t* log,
                      bool cancelable = false) noexcept
{
    ev.handler = handler;
    ev.data = data;
    ev.log = log;
    ev.cancelable = cancelable;
}

// A cancelable timer that belongs to an object and goes with it.
struct OwnedTimer {
    ngx_event_t event{};

    OwnedTimer(ngx_event_handler_pt handler, void* data, ngx_log_t* log) noexcept
    {
        set_event(event, handler, data, log, true);
    }
    ~OwnedTimer()
    {
        if (event.timer_set) {
            ngx_del_timer(&event);
        }
    }
    OwnedTimer(const OwnedTimer&) = delete;
    OwnedTimer& operator=(const OwnedTimer&) = delete;
};

}  // namespace idem
