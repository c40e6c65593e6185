// store.cpp — see store.hpp: what the stores share.

#include "store.hpp"

namespace idem {

Decision ClaimWaiter::judge(std::string_view key, std::string_view& stored, char*& opened, ngx_log_t* log) const noexcept
{
    if (is_sealed(stored)) {  // only a sealed record needs room to open into
        opened = static_cast<char*>(ngx_alloc(stored.size(), log));
        if (opened == nullptr) {
            return Decision::unavailable;
        }
    }
    AtRest why = AtRest::ok;
    Decision decision = decide_at_rest(key, stored, keys, key_count, fingerprint, opened, why);
    if (why != AtRest::ok) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "idempotency: the record under \"%*s\" does not open: %s", key.size(),
                      key.data(), at_rest_reason(why));
    }
    return decision;
}

}  // namespace idem
