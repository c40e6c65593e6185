// fingerprint.hpp — SHA-256 over what makes a request "the same request":
// method, raw request URI and body bytes (docs/design.md#mismatch). Bodies are fed in
// chunks as they are found (memory buffers or temporary file reads).
// Pure: knows nothing of nginx.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace idem {

using Digest = std::array<std::uint8_t, 32>;

// Incremental SHA-256: OpenSSL's, its state kept here (no allocation, no
// provider dispatch per digest). Not copyable.
class Sha256 {
public:
    Sha256() noexcept;
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    bool ok() const noexcept { return ok_; }
    void update(const void* data, std::size_t size) noexcept;
    // The pieces in order, as one input: short ones are joined first, each
    // call into OpenSSL costing more than hashing a few bytes.
    void update(std::initializer_list<std::string_view> pieces) noexcept;
    Digest finish() noexcept;
    // Clears the state, for a digest of secret material.
    void wipe() noexcept;

private:
    alignas(8) unsigned char state_[112];  // SHA256_CTX
    bool ok_;
};

Digest sha256(std::string_view data) noexcept;

// The default fingerprint's start: the method and the raw URI, framed
// unambiguously; the body bytes follow as they come.
void frame_default(Sha256& sha, std::string_view method, std::string_view uri) noexcept;

// The request fingerprint: method and URI framed unambiguously, then the
// body bytes in as many chunks as the caller has.
class Fingerprinter {
public:
    Fingerprinter(std::string_view method, std::string_view uri) noexcept;
    bool ok() const noexcept { return sha_.ok(); }
    void add_body(const void* data, std::size_t size) noexcept { sha_.update(data, size); }
    Digest finish() noexcept { return sha_.finish(); }

private:
    Sha256 sha_;
};

// Lower-case hex of `size` bytes into out (room for 2 * size).
void to_hex(const std::uint8_t* data, std::size_t size, char* out) noexcept;

}  // namespace idem
