// fingerprint_parts.cpp — see fingerprint_parts.hpp.

#include "fingerprint_parts.hpp"

#include "big_endian.hpp"

namespace idem {
namespace {

constexpr std::string_view version_tag{"\0idempotency-fingerprint/2\0", 27};

}  // namespace

void begin_parts(Sha256& sha, std::string_view description) noexcept
{
    sha.update({version_tag});
    begin_part(sha, Part{0}, description.size());
    sha.update(description.data(), description.size());
}

void add_part(Sha256& sha, Part part, std::string_view value) noexcept
{
    begin_part(sha, part, value.size());
    sha.update(value.data(), value.size());
}

void begin_part(Sha256& sha, Part part, std::uint64_t length) noexcept
{
    char head[9];
    head[0] = static_cast<char>(part);
    put_be(head + 1, length);
    sha.update(head, sizeof head);
}

}  // namespace idem
