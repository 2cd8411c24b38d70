// Which loops of a bufferized module run on kiln's thread pool, and how they are split into tasks.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// Marks an scf.for loop whose iterations write disjoint memory (a contraction's cache-tile loops
// over m and n): it may run in parallel.
inline constexpr const char* kParallelLoopAttr = "kiln.parallel";

// After linalg → parallel loops, before the async lowering: turns marked scf.for nests into
// scf.parallel, picks the parallel loops worth running on several threads (outermost, no
// allocations or calls inside, enough work), and rewrites each into tasks
// (async-parallel-for) sized so a task holds enough work to pay for its dispatch. The task count
// follows the thread count at run time (KILN_NUM_THREADS), so the code does not depend on it.
// Every other scf.parallel stays a sequential loop.
void parallelize_loops(mlir::ModuleOp module);

}  // namespace kiln::cpu
