// fingerprint.cpp — SHA-256 through OpenSSL 3 EVP, the request fingerprint
// built on it, and lower-case hex encoding.
#include "fingerprint.hpp"

#include <openssl/evp.h>

namespace idem {
namespace {

// OpenSSL 3 looks EVP_sha256() up in its provider tables on every init; an
// explicitly fetched implementation is looked up once per process.
const EVP_MD* sha256_md() noexcept
{
    static EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
}

}  // namespace

Sha256::Sha256() noexcept : ctx_(EVP_MD_CTX_new()), ok_(false)
{
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_, sha256_md(), nullptr) == 1;
}

Sha256::~Sha256()
{
    EVP_MD_CTX_free(ctx_);
}

void Sha256::update(const void* data, std::size_t size) noexcept
{
    // A failed context stays failed: a digest over partial input must never
    // pass for the real one.
    if (!ok() || size == 0) {
        return;
    }
    ok_ = EVP_DigestUpdate(ctx_, data, size) == 1;
}

Digest Sha256::finish() noexcept
{
    Digest digest{};
    unsigned int written = 0;
    if (ok()) {
        ok_ = EVP_DigestFinal_ex(ctx_, digest.data(), &written) == 1
              && written == digest.size();
    }
    if (!ok_) {
        digest.fill(0);
    }
    return digest;
}

Digest sha256(std::string_view data) noexcept
{
    Sha256 sha;
    sha.update(data.data(), data.size());
    return sha.finish();
}

Fingerprinter::Fingerprinter(std::string_view method, std::string_view uri) noexcept
{
    // Neither a method nor a raw request URI can contain '\n', so the
    // separators make the framing unambiguous.
    sha_.update(method.data(), method.size());
    sha_.update("\n", 1);
    sha_.update(uri.data(), uri.size());
    sha_.update("\n", 1);
}

void to_hex(const std::uint8_t* data, std::size_t size, char* out) noexcept
{
    static const char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < size; ++i) {
        out[2 * i] = digits[data[i] >> 4];
        out[2 * i + 1] = digits[data[i] & 0x0f];
    }
}

}  // namespace idem
