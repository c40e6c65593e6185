// redis/tls_reason.cpp — see tls_reason.hpp.

#include "tls_reason.hpp"

#include <openssl/x509_vfy.h>

namespace idem::redis {

std::string_view verify_reason(long code) noexcept
{
    switch (code) {
    case X509_V_OK:
        return "verified";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_UNTRUSTED:
        return "unknown CA: the certificate of Redis does not chain to idempotency_redis_ssl_trusted_certificate";
    case X509_V_ERR_CERT_HAS_EXPIRED:
        return "expired: the certificate of Redis (or of a CA above it) has expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "not yet valid: the certificate of Redis (or of a CA above it) is not valid yet";
    case X509_V_ERR_CERT_REVOKED:
        return "revoked: the certificate of Redis was revoked";
    case X509_V_ERR_CERT_CHAIN_TOO_LONG:
        return "chain too long: the certificate of Redis is too many CAs away from a trusted one";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return "name mismatch: the certificate of Redis is not for idempotency_redis_ssl_name";
    case X509_V_ERR_INVALID_PURPOSE:
        return "wrong purpose: the certificate of Redis is not for a TLS server";
    default:
        return "the certificate of Redis failed verification";
    }
}

namespace {

// What each TLS alert means, when Redis sent it (`received`) and when
// OpenSSL sent it to Redis.
struct AlertReason {
    int description;
    std::string_view received;
    std::string_view sent;
};

constexpr std::string_view cipher_received =
    "handshake failure: no cipher or parameters in common with Redis (idempotency_redis_ssl_ciphers)";
constexpr std::string_view cipher_sent = "handshake failure: Redis chose nothing idempotency_redis_ssl_ciphers allows";
constexpr std::string_view refused_received = "client certificate refused by Redis (idempotency_redis_ssl_certificate)";
constexpr std::string_view refused_sent = "the certificate of Redis was refused";
constexpr std::string_view garbled_received = "protocol: Redis could not follow the handshake";
constexpr std::string_view garbled_sent = "protocol: what Redis sent is not TLS (is this its TLS port?)";

constexpr AlertReason alert_reasons[] = {
    {70, "protocol: Redis accepts none of idempotency_redis_ssl_protocols",  // protocol_version
     "protocol: Redis offers none of idempotency_redis_ssl_protocols, or is not a TLS port"},
    {40, cipher_received, cipher_sent},    // handshake_failure
    {71, cipher_received, cipher_sent},    // insufficient_security
    {113, cipher_received, cipher_sent},   // bad_certificate_status_response
    {116, "client certificate required: Redis asks for idempotency_redis_ssl_certificate",  // certificate_required
     "client certificate required: Redis asks for idempotency_redis_ssl_certificate"},
    {48, "unknown CA: Redis does not trust the client certificate (idempotency_redis_ssl_certificate)",  // unknown_ca
     "unknown CA: the certificate of Redis does not chain to idempotency_redis_ssl_trusted_certificate"},
    {42, refused_received, refused_sent},  // bad_certificate
    {43, refused_received, refused_sent},  // unsupported_certificate
    {44, refused_received, refused_sent},  // certificate_revoked
    {46, refused_received, refused_sent},  // certificate_unknown
    {45, "expired: Redis says the client certificate has expired (idempotency_redis_ssl_certificate)",
     "expired: the certificate of Redis has expired"},  // certificate_expired
    {112, "Redis does not know the server name sent (idempotency_redis_ssl_name)",  // unrecognized_name
     "Redis does not know the server name sent (idempotency_redis_ssl_name)"},
    {10, garbled_received, garbled_sent},  // unexpected_message
    {50, garbled_received, garbled_sent},  // decode_error
};

}  // namespace

std::string_view alert_reason(int description, bool received) noexcept
{
    for (const AlertReason& a : alert_reasons) {
        if (a.description == description) {
            return received ? a.received : a.sent;
        }
    }
    return received ? "TLS alert from Redis" : "TLS alert sent to Redis";
}

}  // namespace idem::redis
