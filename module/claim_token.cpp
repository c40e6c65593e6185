// claim_token.cpp — see claim_token.hpp.

#include "claim_token.hpp"

#include <cstring>

#include "big_endian.hpp"

namespace idem {
namespace {

constexpr char holder_mark = 'H';

std::size_t host_length(const Holder& holder) noexcept
{
    return holder.host.size() < max_holder_host ? holder.host.size() : max_holder_host;
}

}  // namespace

std::size_t claim_token_size(const Holder& holder) noexcept
{
    return token_unique_length + holder_fixed + host_length(holder);
}

std::size_t encode_claim_token(const unsigned char* unique, const Holder& holder, char* out) noexcept
{
    std::memcpy(out, unique, token_unique_length);
    char* p = out + token_unique_length;
    *p++ = holder_mark;
    p = put_be(p, holder.pid);
    p = put_be(p, holder.claimed_at_ms);
    p = put_be(p, holder.lock_ttl_ms);
    const std::size_t host = host_length(holder);
    *p++ = static_cast<char>(host);
    if (host != 0) {
        std::memcpy(p, holder.host.data(), host);
    }
    return static_cast<std::size_t>(p + host - out);
}

std::optional<Holder> read_holder(std::string_view token) noexcept
{
    if (token.size() < token_unique_length + holder_fixed || token[token_unique_length] != holder_mark) {
        return std::nullopt;
    }
    const char* p = token.data() + token_unique_length + 1;
    Holder holder;
    holder.pid = get_be<std::uint32_t>(p);
    holder.claimed_at_ms = get_be<std::uint64_t>(p + 4);
    holder.lock_ttl_ms = get_be<std::uint32_t>(p + 12);
    const std::size_t host = static_cast<unsigned char>(p[16]);
    if (token.size() != token_unique_length + holder_fixed + host) {
        return std::nullopt;
    }
    holder.host = {p + 17, host};
    return holder;
}

}  // namespace idem
