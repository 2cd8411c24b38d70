// Buffers freed after their last use instead of when the function returns.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// After MLIR's buffer deallocation pipeline, which frees every buffer a function allocates at
// the end of the block that allocated it: moves each such memref.dealloc up to just after the
// last op of that block that uses the buffer or a view of it. A network's intermediates then live
// only as long as they are read: the next allocations reuse memory that is still in cache, and
// the peak working set is no longer the sum of every intermediate.
void free_buffers_after_last_use(mlir::ModuleOp module);

}  // namespace kiln::cpu
