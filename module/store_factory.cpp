// store_factory.cpp — see store_factory.hpp.

#include "store_factory.hpp"

#include "conf_util.hpp"
#include "pieces.hpp"

#include "redis/worker_stores.hpp"
#include "zone/zone_conf.hpp"

namespace idem {

Store* store_for(const LocConf& conf) noexcept
{
    return conf.zone != nullptr ? zone::attached_store(conf.zone) : redis::worker_store(*conf.server, conf.redis_timeout);
}

ClaimWaiter location_waiter(const LocConf& conf, ClaimCallback callback, void* data, const Digest& fingerprint) noexcept
{
    ngx_array_t* keys = conf.seal_keys;
    return ClaimWaiter{callback,
                       data,
                       fingerprint,
                       keys != nullptr ? static_cast<SecretKey*>(keys->elts) : nullptr,
                       keys != nullptr ? keys->nelts : 0,
                       conf.fence,
                       ReplayLimits{conf.max_response_size, piece_body_size(conf.piece_size)},
                       location_dictionaries(conf)};
}

}  // namespace idem
