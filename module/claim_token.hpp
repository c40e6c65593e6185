// claim_token.hpp — the claim token: 16 unique bytes (all the protocol needs),
// then, for the operator's inspection only, who holds the claim. A 16-byte
// token (an older release's) tells no holder. Pure.
// See docs/design.md#who-holds-a-claim. Layout (big-endian):
//
// Layout (integers big-endian):
//   unique(16) 'H' pid(4) claimed_at_ms(8) lock_ttl_ms(4) host_len(1) host
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace idem {

constexpr std::size_t token_unique_length = 16;
constexpr std::size_t max_holder_host = 64;  // a longer host name is cut to this
constexpr std::size_t holder_fixed = 1 + 4 + 8 + 4 + 1;  // 'H', pid, claimed_at_ms, lock_ttl_ms, host_len
constexpr std::size_t max_claim_token = token_unique_length + holder_fixed + max_holder_host;

struct Holder {
    std::string_view host;
    std::uint32_t pid = 0;
    std::uint64_t claimed_at_ms = 0;
    std::uint32_t lock_ttl_ms = 0;
};

// Its host cut to max_holder_host.
std::size_t claim_token_size(const Holder& holder) noexcept;
// `out` has room for claim_token_size; returns its size.
std::size_t encode_claim_token(const unsigned char* unique, const Holder& holder, char* out) noexcept;
// nullopt for a token without one, or not of this layout.
std::optional<Holder> read_holder(std::string_view token) noexcept;

}  // namespace idem
