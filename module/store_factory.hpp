// store_factory.hpp — which store a location's claims go to: the one file
// that knows both backends (redis/redis_store.*, zone/zone_store.*), above
// them and below the request (claim.cpp). See docs/design.md#layers.
#pragma once

#include "conf.hpp"
#include "store.hpp"

namespace idem {

// Where a location's claims go: its zone, or this worker's store for its
// Redis deployment (its reply timeout set); nullptr when none can take
// claims now. Chosen once per request.
Store* store_for(const LocConf& conf) noexcept;

}  // namespace idem
