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

std::string_view alert_reason(int description, bool received) noexcept
{
    switch (description) {
    case 70:   // protocol_version
        return received ? "protocol: Redis accepts none of idempotency_redis_ssl_protocols"
                        : "protocol: Redis offers none of idempotency_redis_ssl_protocols, or is not a TLS port";
    case 40:   // handshake_failure
    case 71:   // insufficient_security
    case 113:  // bad_certificate_status_response
        return received ? "handshake failure: no cipher or parameters in common with Redis (idempotency_redis_ssl_ciphers)"
                        : "handshake failure: Redis chose nothing idempotency_redis_ssl_ciphers allows";
    case 116:  // certificate_required
        return "client certificate required: Redis asks for idempotency_redis_ssl_certificate";
    case 48:   // unknown_ca
        return received ? "unknown CA: Redis does not trust the client certificate (idempotency_redis_ssl_certificate)"
                        : "unknown CA: the certificate of Redis does not chain to idempotency_redis_ssl_trusted_certificate";
    case 42:   // bad_certificate
    case 43:   // unsupported_certificate
    case 44:   // certificate_revoked
    case 46:   // certificate_unknown
        return received ? "client certificate refused by Redis (idempotency_redis_ssl_certificate)"
                        : "the certificate of Redis was refused";
    case 45:   // certificate_expired
        return received ? "expired: Redis says the client certificate has expired (idempotency_redis_ssl_certificate)"
                        : "expired: the certificate of Redis has expired";
    case 112:  // unrecognized_name
        return "Redis does not know the server name sent (idempotency_redis_ssl_name)";
    case 10:   // unexpected_message
    case 50:   // decode_error
        return received ? "protocol: Redis could not follow the handshake"
                        : "protocol: what Redis sent is not TLS (is this its TLS port?)";
    default:
        return received ? "TLS alert from Redis" : "TLS alert sent to Redis";
    }
}

}  // namespace idem::redis
