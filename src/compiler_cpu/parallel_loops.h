// Which loops of a bufferized module run on kiln's thread pool, and how they are split into tasks.
#pragma once

#include <cstdint>

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
// Consecutive kernels too small for that, none touching what another writes, run as two shares
// of about equal work where they hold enough of it together. Every other scf.parallel stays a
// sequential loop.
void parallelize_loops(mlir::ModuleOp module);

// A dimension with this many iterations or more is shared out as it is: one more or less per
// thread does not matter then (the threads take equal counts of whole iterations).
inline constexpr int64_t kEnoughIterationsToShare = 8;

// How much more than half of `extent` the larger of two threads' shares is (1.0: even) when a loop
// over it in steps of `step` is shared out as equal counts of whole iterations, as
// parallelize_loops does: 96 rows in 64-row tiles give one thread 64 rows, the other 32 (1.33).
// Infinite for fewer than two iterations (nothing to share).
double two_thread_imbalance(int64_t extent, int64_t step);

}  // namespace kiln::cpu
