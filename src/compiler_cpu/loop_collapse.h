// Kernels whose innermost loops are short run them as one long loop, so they vectorise.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// On a bufferized module, before kiln's vectorisation:
//
// - Elementwise linalg.generic ops (every loop parallel) merge their innermost loops into one
//   where every operand either walks those dimensions contiguously, in loop order, or does not
//   read them (a per-channel bias). A 1152x7x7 SiLU was a 7-long row: scalar loops, one expf per
//   element (4 ns each); as 1152 rows of 49 it vectorises.
//
// - Each run of adjacent reduction loops of a linalg.generic becomes one loop, where every
//   operand's collapsed dimensions are contiguous in memory. kiln leaves reductions to LLVM's loop
//   vectoriser, which vectorises the innermost loop when the combine may be reassociated (ONNX
//   imports mark their sums so): over a 56-long row it paid an overlap check and a horizontal sum
//   per row, and a global average pool ran at a tenth of the speed of one 3136-long loop.
void collapse_short_loops(mlir::ModuleOp module);

}  // namespace kiln::cpu
