// Internal: the allocator compiled code calls (finalize-memref-to-llvm{use-generic-functions}),
// so that an allocation that fails ends the call with an error instead of letting the code write
// through a null pointer.
#pragma once

#include <string>

namespace kiln::cpu {

using PackedEntry = void (*)(void**);

// Calls `entry(args)`. Returns false, with the reason in `error`, when compiled code failed to
// allocate memory; the call's earlier allocations are then lost (memory was exhausted anyway).
bool call_checking_allocations(PackedEntry entry, void** args, std::string& error);

}  // namespace kiln::cpu
