// Internal: how much memory this machine can give a process.
#pragma once

#include <cstdint>

namespace kiln {

// Physical memory plus swap, or 0 when unknown; asked once. An allocation larger than this can
// never succeed, whatever the kernel's overcommit policy says at malloc time.
uint64_t machine_memory_bytes();

}  // namespace kiln
