// store_factory.cpp — see store_factory.hpp.

#include "store_factory.hpp"

#include "redis/redis_store.hpp"
#include "zone/zone_store.hpp"

namespace idem {

Store* store_for(const LocConf& conf) noexcept
{
    return conf.zone != nullptr ? zone::attached_store(conf.zone) : redis::worker_store(*conf.server, conf.redis_timeout);
}

}  // namespace idem
