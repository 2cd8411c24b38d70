// Reductions over several adjacent dimensions run as one long loop.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// Collapses each run of adjacent reduction loops of a bufferized linalg.generic into one loop (a
// global average pool's height and width become one 3136-long loop), where every operand's
// collapsed dimensions are contiguous in memory.
//
// kiln leaves reductions to LLVM's loop vectoriser, which vectorises the innermost loop when the
// combine may be reassociated (ONNX imports mark their sums so): over a 56-long row it paid an
// overlap check and a horizontal sum per row, and the kernel ran at a third of the speed of one
// long loop.
void collapse_reduction_loops(mlir::ModuleOp module);

}  // namespace kiln::cpu
