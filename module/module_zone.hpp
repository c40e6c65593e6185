// module_zone.hpp — a small shared memory zone of the module's own (the
// metrics, the live board): one zeroed block of a fixed size, set up when
// the zone is new and kept across reloads, found again by name in the
// cycle a worker runs (never remembered from the last configuration read:
// a reload that fails leaves the running cycle in place, and a worker
// respawned after it must attach to that one).
#pragma once

#include <cstddef>
#include <string_view>

#include "ngx.hpp"

namespace idem {

// Postconfiguration: the zone `name` of `zone_size` bytes, whose block has
// `block_size` bytes.
ngx_int_t add_module_zone(ngx_conf_t* cf, std::string_view name, std::size_t zone_size,
                          std::size_t block_size) noexcept;
// The block of the zone `name` in `cycle` (init_process); nullptr when none.
void* module_zone_block(ngx_cycle_t* cycle, std::string_view name) noexcept;

}  // namespace idem
