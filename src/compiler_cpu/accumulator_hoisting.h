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

// A contraction's output filled with a value just before it (zeros, for a product) costs a pass
// over memory the product then reads back. Before tiling, mark_absorbable_fills marks such fills
// (the contraction writes the whole buffer and has a reduction of at least one step); after
// tiling and hoist_accumulators, absorb_fills drops each marked fill whose contraction reads
// every place of its buffer from loops that either move the place or revisit it (at most one
// loop revisits: the reduction block loop of a contraction with more than one block). That loop's
// first iteration is peeled off and reads the fill's value instead of the buffer; the rest read
// the partial sums.
void mark_absorbable_fills(mlir::ModuleOp module);
void absorb_fills(mlir::ModuleOp module);

}  // namespace kiln::cpu
