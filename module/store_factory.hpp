// store_factory.hpp — which store a location's claims go to: the one file
// that knows both backends, through where each keeps its stores (a worker's
// Redis stores: redis/worker_stores.*; a zone's: zone/zone_conf.*), above
// them and below the request (claim.cpp). See docs/design.md#layers.
#pragma once

#include "conf.hpp"
#include "store.hpp"

namespace idem {

// Where a location's claims go: its zone, or this worker's store for its
// Redis deployment (its reply timeout set); nullptr when none can take
// claims now. Chosen once per request.
Store* store_for(const LocConf& conf) noexcept;

// Who waits for a claim in a location (`callback` with `data`), and how
// what it finds is judged there: its fingerprint, the location's keys and
// dictionaries, its fence and its largest record.
ClaimWaiter location_waiter(const LocConf& conf, ClaimCallback callback, void* data, const Digest& fingerprint) noexcept;

}  // namespace idem
