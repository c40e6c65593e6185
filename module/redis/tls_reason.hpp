// redis/tls_reason.hpp — why a TLS connection to Redis failed, in words an
// operator acts on. Pure.
#pragma once

#include <string_view>

namespace idem::redis {

// X509_V_ERR_*.
std::string_view verify_reason(long code) noexcept;

// RFC 8446 6.2 AlertDescription, sent by Redis (`received`) or by the module.
std::string_view alert_reason(int description, bool received) noexcept;

}  // namespace idem::redis
