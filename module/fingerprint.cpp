// fingerprint.cpp — SHA-256 (OpenSSL), the request fingerprint built on
// it, and lower-case hex encoding.
#include "fingerprint.hpp"

// The one-shot and EVP interfaces cost an allocation, a provider lookup and
// a cleanse per digest, more than the hashing of a small request; OpenSSL 3
// still ships the low-level functions (deprecated in favour of EVP).
#define OPENSSL_API_COMPAT 10101
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstring>

namespace idem {
namespace {

SHA256_CTX* state(unsigned char* bytes) noexcept
{
    static_assert(sizeof(SHA256_CTX) <= 112 && alignof(SHA256_CTX) <= 8, "Sha256::state_ holds a SHA256_CTX");
    return reinterpret_cast<SHA256_CTX*>(bytes);
}

}  // namespace

Sha256::Sha256() noexcept : ok_(SHA256_Init(state(state_)) == 1) {}

Sha256::~Sha256() = default;

void Sha256::wipe() noexcept
{
    OPENSSL_cleanse(state_, sizeof(state_));
}

void Sha256::update(const void* data, std::size_t size) noexcept
{
    // A failed context stays failed: a digest over partial input must never
    // pass for the real one.
    if (!ok_ || size == 0) {
        return;
    }
    ok_ = SHA256_Update(state(state_), data, size) == 1;
}

void Sha256::update(std::initializer_list<std::string_view> pieces) noexcept
{
    char joined[256];
    std::size_t used = 0;
    for (std::string_view piece : pieces) {
        if (piece.size() > sizeof(joined) - used) {
            update(joined, used);
            used = 0;
            if (piece.size() > sizeof(joined)) {
                update(piece.data(), piece.size());
                continue;
            }
        }
        if (!piece.empty()) {
            std::memcpy(joined + used, piece.data(), piece.size());
            used += piece.size();
        }
    }
    update(joined, used);
}

Digest Sha256::finish() noexcept
{
    Digest digest{};
    if (ok_) {
        ok_ = SHA256_Final(digest.data(), state(state_)) == 1;
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
    Digest digest = sha.finish();
    sha.wipe();  // the one-shot digest is taken of key material (seal.cpp)
    return digest;
}

void frame_default(Sha256& sha, std::string_view method, std::string_view uri) noexcept
{
    // Neither a method nor a raw request URI can contain '\n', so the
    // separators make the framing unambiguous.
    sha.update({method, "\n", uri, "\n"});
}

Fingerprinter::Fingerprinter(std::string_view method, std::string_view uri) noexcept
{
    frame_default(sha_, method, uri);
}

namespace {

constexpr std::array<char, 512> hex_pairs = [] {
    std::array<char, 512> pairs{};
    const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < 256; i++) {
        pairs[2 * i] = digits[i >> 4];
        pairs[2 * i + 1] = digits[i & 0x0f];
    }
    return pairs;
}();

}  // namespace

void to_hex(const std::uint8_t* data, std::size_t size, char* out) noexcept
{
    for (std::size_t i = 0; i < size; ++i) {
        std::memcpy(out + 2 * i, &hex_pairs[2 * data[i]], 2);
    }
}

}  // namespace idem
