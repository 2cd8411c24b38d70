// Keeps a contraction's register tile in registers across its reduction loop.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// Moves each read/write pair of one vector (a contraction's accumulator tile) out of the scf.for
// that would otherwise load and store it on every iteration: read before the loop, carried as a
// loop value, written once after it. Applies where the pair reads and writes the same place of a
// buffer the function allocated itself and nothing else in the loop touches that allocation.
//
// MLIR's own hoisting (hoist_redundant_vector_transfers) refuses any buffer that also has a view
// anywhere in the function, and a model's contraction result always has one (the reshape back
// to NCHW after the product): without this step such contractions ran 2-3x slower.
void hoist_accumulators(mlir::ModuleOp module);

}  // namespace kiln::cpu
