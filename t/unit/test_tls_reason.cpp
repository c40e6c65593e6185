// Why a TLS connection to Redis failed: verification results and alerts
// turned into the reason an operator reads in the error log.
#include <gtest/gtest.h>

#include <openssl/x509_vfy.h>

#include <string>

#include "redis/tls_reason.hpp"

using idem::redis::alert_reason;
using idem::redis::verify_reason;

namespace {

bool starts_with(std::string_view text, std::string_view prefix)
{
    return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

TEST(VerifyReason, AnUntrustedChainIsAnUnknownCa)
{
    for (long code : {X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
                      X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
                      X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED}) {
        EXPECT_TRUE(starts_with(verify_reason(code), "unknown CA: ")) << code;
    }
}

TEST(VerifyReason, DatesNamesAndRevocationHaveTheirOwnWords)
{
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_CERT_HAS_EXPIRED), "expired: "));
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_CERT_NOT_YET_VALID), "not yet valid: "));
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_CERT_REVOKED), "revoked: "));
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_HOSTNAME_MISMATCH), "name mismatch: "));
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_IP_ADDRESS_MISMATCH), "name mismatch: "));
    EXPECT_TRUE(starts_with(verify_reason(X509_V_ERR_CERT_CHAIN_TOO_LONG), "chain too long: "));
}

TEST(VerifyReason, AnythingElseIsAFailedVerification)
{
    EXPECT_EQ(verify_reason(X509_V_ERR_CERT_SIGNATURE_FAILURE), "the certificate of Redis failed verification");
    EXPECT_EQ(verify_reason(-1), "the certificate of Redis failed verification");
    EXPECT_EQ(verify_reason(X509_V_OK), "verified");
}

TEST(AlertReason, ProtocolVersionSaysWhichSideCouldNot)
{
    EXPECT_TRUE(starts_with(alert_reason(70, true), "protocol: Redis accepts none of"));
    EXPECT_TRUE(starts_with(alert_reason(70, false), "protocol: Redis offers none of"));
    EXPECT_NE(alert_reason(70, false).find("not a TLS port"), std::string_view::npos);
}

TEST(AlertReason, ClientCertificateProblemsNameTheDirective)
{
    for (int alert : {116, 48, 42, 43, 44, 46, 45}) {
        EXPECT_NE(alert_reason(alert, true).find("idempotency_redis_ssl_certificate"), std::string_view::npos)
            << alert;
    }
    EXPECT_TRUE(starts_with(alert_reason(116, true), "client certificate required: "));
    EXPECT_TRUE(starts_with(alert_reason(48, true), "unknown CA: Redis does not trust the client certificate"));
}

TEST(AlertReason, AlertsWeSendAreAboutRedis)
{
    EXPECT_TRUE(starts_with(alert_reason(48, false), "unknown CA: the certificate of Redis"));
    EXPECT_TRUE(starts_with(alert_reason(45, false), "expired: the certificate of Redis"));
    EXPECT_TRUE(starts_with(alert_reason(40, true), "handshake failure: "));
    EXPECT_NE(alert_reason(50, false).find("TLS port"), std::string_view::npos);
}

TEST(AlertReason, UnknownAlertsStillSayWhoSentThem)
{
    EXPECT_EQ(alert_reason(200, true), "TLS alert from Redis");
    EXPECT_EQ(alert_reason(200, false), "TLS alert sent to Redis");
}
