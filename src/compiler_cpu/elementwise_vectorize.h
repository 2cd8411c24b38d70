// Elementwise kernels (bias, activations, residual adds) as explicit vector code.
#pragma once

#include <set>
#include <string>

namespace mlir {
class ModuleOp;
class Type;
namespace linalg {
class GenericOp;
}
}  // namespace mlir

namespace kiln::cpu {

// The mark prepare_elementwise puts on the kernels it selects (their group: loop count and lanes).
inline constexpr const char* kElementwiseAttr = "kiln.rows";

// Whether kiln's vectorisers handle memrefs of this element type (ints of whole bytes, floats,
// index).
bool vector_element(mlir::Type type);

// Whether the generic's body calls a math-dialect function (exp, tanh, sqrt...).
bool calls_math(mlir::linalg::GenericOp op);
// Whether it calls a math function whose vector form is a library call (exp, log, tanh...): such
// kernels use 8 lanes, the widest the library has; others 16.
bool calls_library_math(mlir::linalg::GenericOp op);

// Whether the generic's body is arith and math functions that have a vector form only (what
// kiln's vectorisers turn into vector ops that lower), without integer division (a partial
// vector's unused lanes could divide by zero).
bool plain_arithmetic(mlir::linalg::GenericOp op);

// Marks the kernels of a bufferized module that kiln vectorises itself and returns their groups,
// one transform script each:
// - elementwise linalg.generic ops that vectorise along their innermost dimension: every loop
//   parallel, static shapes, one output written in loop order, each input either contiguous
//   along the innermost loop or constant along it (a broadcast), arithmetic and vector-lowerable
//   math only (group: the loop count);
// - linalg.transpose ops whose input rows become output columns, both at least a vector long
//   (group: one per rank and tile shape).
//
// Left to LLVM, such loops vectorise only behind a run-time overlap check between the input and
// output buffers, and bufferisation often computes them in place (the output is the input's
// buffer): the check fails and the scalar loop runs, with one libm call per element for
// exp/sigmoid (efficientnet_b0 spent 14% of its time in scalar expf). Transposes read one
// element per column.
std::set<int> prepare_elementwise(mlir::ModuleOp module);

// For one group: tiles the marked ops (elementwise: 1 x ... x 1 x 8; transposes: 8 x 8 on the
// two dimensions that swap), marks the tile loops parallel (disjoint output blocks) and
// vectorises each tile (masked where a size is not a multiple of the vector).
std::string elementwise_group_script(int group);

}  // namespace kiln::cpu
