// store_factory.hpp — which store a location's claims go to: the one file that
// knows both backends, above them and below the request.
// See docs/design.md#layers.
#pragma once

#include "conf.hpp"
#include "store.hpp"

namespace idem {

// Its zone, or this worker's store for its Redis deployment (reply timeout
// set); nullptr when none can take claims now. Chosen once per request.
Store* store_for(const LocConf& conf) noexcept;

// Judged with the location's keys, dictionaries, fence and largest record.
ClaimWaiter location_waiter(const LocConf& conf, ClaimCallback callback, void* data, const Digest& fingerprint) noexcept;

}  // namespace idem
