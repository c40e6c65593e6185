// claim_token.hpp — what a claim's token says about its holder
// (docs/design.md#who-holds-a-claim). The token's first 16 bytes make it
// unique (all the claim protocol needs of it); then, for the operator's
// inspection only, who holds the claim: the gateway's host name, its
// worker's pid, when the claim was made (Unix ms, by the gateway's clock)
// and the lock_ttl it is renewed with. A token of 16 bytes alone (an
// older release's) has no holder to tell. Pure: knows nothing of nginx.
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

// Size of a token for this holder (its host cut to max_holder_host).
std::size_t claim_token_size(const Holder& holder) noexcept;
// Writes the token (room for claim_token_size); returns its size.
std::size_t encode_claim_token(const unsigned char* unique, const Holder& holder, char* out) noexcept;
// The holder a token names; nullopt for a token without one, or not of this layout.
std::optional<Holder> read_holder(std::string_view token) noexcept;

}  // namespace idem
