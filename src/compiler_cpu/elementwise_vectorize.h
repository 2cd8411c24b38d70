// Elementwise kernels (bias, activations, residual adds) as explicit vector code.
#pragma once

#include <set>
#include <string>

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// The mark prepare_elementwise puts on the generics it selects (their loop count).
inline constexpr const char* kElementwiseAttr = "kiln.rows";

// Marks the elementwise linalg.generic ops of a bufferized module that vectorise along their
// innermost dimension: every loop parallel, static shapes, one output written in loop order, and
// each input either contiguous along the innermost loop or constant along it (a broadcast).
// Returns the loop counts (ranks) present, one transform script each.
//
// Left to LLVM, such loops vectorise only behind a run-time overlap check between the input and
// output buffers, and bufferisation often computes them in place (the output is the input's
// buffer): the check fails and the scalar loop runs, with one libm call per element for
// exp/sigmoid (efficientnet_b0 spent 14% of its time in scalar expf).
std::set<int> prepare_elementwise(mlir::ModuleOp module);

// Tiles the marked generics of one rank to 1 x ... x 1 x kElementwiseVector, marks the tile loops
// parallel (disjoint output blocks) and vectorises each tile (masked where the innermost size is
// not a multiple of the vector).
std::string elementwise_group_script(int group);

}  // namespace kiln::cpu
