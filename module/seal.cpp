// seal.cpp — see seal.hpp.

#include "seal.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

#include "fingerprint.hpp"

namespace idem {
namespace {

constexpr char magic[4] = {'I', 'D', 'E', 1};
constexpr std::size_t nonce_size = 12;
constexpr std::size_t tag_size = 16;
constexpr std::size_t header_size = 4 + 4 + nonce_size;

const EVP_CIPHER* aes_256_gcm() noexcept
{
    static EVP_CIPHER* fetched = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
    return fetched != nullptr ? fetched : EVP_aes_256_gcm();
}

struct CtxFree {
    void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

int hex_value(char c) noexcept
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string_view trim(std::string_view s) noexcept
{
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

bool aad_update(EVP_CIPHER_CTX* ctx, std::string_view aad, bool encrypt) noexcept
{
    int n = 0;
    auto* p = reinterpret_cast<const unsigned char*>(aad.data());
    int len = static_cast<int>(aad.size());
    return encrypt ? EVP_EncryptUpdate(ctx, nullptr, &n, p, len) == 1 : EVP_DecryptUpdate(ctx, nullptr, &n, p, len) == 1;
}

}  // namespace

bool parse_secret_key(std::string_view content, SecretKey& key) noexcept
{
    std::string_view hex = trim(content);
    if (hex.size() == 2 * secret_key_size) {
        bool ok = true;
        for (std::size_t i = 0; i < secret_key_size && ok; i++) {
            int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            key.bytes[i] = static_cast<std::uint8_t>(hi * 16 + lo);
        }
        if (!ok) {
            return false;
        }
    } else if (content.size() == secret_key_size) {
        std::memcpy(key.bytes.data(), content.data(), secret_key_size);
    } else {
        return false;
    }
    Digest d = sha256({reinterpret_cast<const char*>(key.bytes.data()), secret_key_size});
    std::memcpy(key.id.data(), d.data(), key.id.size());
    return true;
}

bool is_sealed(std::string_view value) noexcept
{
    return value.size() >= seal_overhead && std::memcmp(value.data(), magic, sizeof(magic)) == 0;
}

bool seal_remnant(std::string_view value, const SecretKey* keys, std::size_t count) noexcept
{
    if (value.size() < seal_overhead) {
        return value.size() >= sizeof(magic) && std::memcmp(value.data(), magic, sizeof(magic)) == 0;
    }
    for (std::size_t i = 0; i < count; i++) {
        if (std::memcmp(keys[i].id.data(), value.data() + 4, 4) == 0) {
            return true;
        }
    }
    return false;
}

bool seal(const SecretKey& key, std::string_view aad, std::string_view plain, char* out) noexcept
{
    auto* o = reinterpret_cast<unsigned char*>(out);
    std::memcpy(o, magic, 4);
    std::memcpy(o + 4, key.id.data(), 4);
    unsigned char* nonce = o + 8;
    if (RAND_bytes(nonce, nonce_size) != 1) {
        return false;
    }
    Ctx ctx(EVP_CIPHER_CTX_new());
    int n = 0;
    unsigned char* body = o + header_size;
    if (!ctx || EVP_EncryptInit_ex(ctx.get(), aes_256_gcm(), nullptr, key.bytes.data(), nonce) != 1
        || !aad_update(ctx.get(), aad, true)
        || EVP_EncryptUpdate(ctx.get(), body, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                             static_cast<int>(plain.size())) != 1
        || static_cast<std::size_t>(n) != plain.size()) {
        return false;
    }
    int tail = 0;
    return EVP_EncryptFinal_ex(ctx.get(), body + n, &tail) == 1 && tail == 0
           && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, tag_size, body + plain.size()) == 1;
}

OpenStatus open_sealed(const SecretKey* keys, std::size_t count, std::string_view aad, std::string_view sealed,
                       char* out, std::size_t& length) noexcept
{
    if (!is_sealed(sealed)) {
        return OpenStatus::invalid;
    }
    auto* s = reinterpret_cast<const unsigned char*>(sealed.data());
    const SecretKey* key = nullptr;
    for (std::size_t i = 0; i < count && key == nullptr; i++) {
        if (std::memcmp(keys[i].id.data(), s + 4, 4) == 0) {
            key = &keys[i];
        }
    }
    if (key == nullptr) {
        return OpenStatus::unknown_key;
    }
    std::size_t cipher_size = sealed.size() - seal_overhead;
    const unsigned char* body = s + header_size;
    unsigned char tag[tag_size];
    std::memcpy(tag, body + cipher_size, tag_size);

    Ctx ctx(EVP_CIPHER_CTX_new());
    int n = 0, tail = 0;
    auto* o = reinterpret_cast<unsigned char*>(out);
    bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), aes_256_gcm(), nullptr, key->bytes.data(), s + 8) == 1
              && aad_update(ctx.get(), aad, false)
              && EVP_DecryptUpdate(ctx.get(), o, &n, body, static_cast<int>(cipher_size)) == 1
              && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, tag_size, tag) == 1
              && EVP_DecryptFinal_ex(ctx.get(), o + n, &tail) == 1;
    if (!ok) {
        std::memset(out, 0, cipher_size);  // never hand out unauthenticated plaintext
        return OpenStatus::invalid;
    }
    length = static_cast<std::size_t>(n + tail);
    return OpenStatus::ok;
}

}  // namespace idem
