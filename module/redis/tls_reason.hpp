// redis/tls_reason.hpp — why a TLS connection to Redis failed, in the words
// an operator acts on: the certificate's chain (unknown CA, expired, ...),
// its name, or the TLS alert one side sent during the handshake (protocol,
// ciphers, client certificate). Pure: numbers in, text out.
#pragma once

#include <string_view>

namespace idem::redis {

// The result of the server certificate's verification (X509_V_ERR_*).
std::string_view verify_reason(long code) noexcept;

// A TLS alert (its AlertDescription, RFC 8446 6.2), sent by Redis
// (`received`) or by the module.
std::string_view alert_reason(int description, bool received) noexcept;

}  // namespace idem::redis
