// module_zone.hpp — a small zone of the module's own (metrics, live board):
// one zeroed block, kept across reloads, found by name in the cycle a worker
// runs — never remembered from the last configuration read: a failed reload
// leaves the running cycle, which a respawned worker must attach to.
#pragma once

#include <cstddef>
#include <string_view>

#include "ngx.hpp"

namespace idem {

// Postconfiguration.
ngx_int_t add_module_zone(ngx_conf_t* cf, std::string_view name, std::size_t zone_size,
                          std::size_t block_size) noexcept;
// init_process; nullptr when none.
void* module_zone_block(ngx_cycle_t* cycle, std::string_view name) noexcept;

}  // namespace idem
