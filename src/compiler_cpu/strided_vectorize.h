// Elementwise kernels that read their inputs with a stride or an offset, as explicit vector code.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// Rewrites the all-parallel linalg.generic ops of a bufferized module that linalg's vectoriser
// refuses because an input map is not a projected permutation: a strided convolution's window
// gather (x[2*oh + kh, 2*ow + kw]), a phase-plane copy, a strided pool's taps, reads at an offset
// (x[i + 1]). Each becomes loops over the outer dimensions (marked parallel: disjoint output rows)
// and, along the innermost one, vectors of 16 (8 when the body calls math functions). An input
// read with stride S along the innermost loop loads S*16 contiguous elements and keeps every S-th
// with one shuffle; left to LLVM these loops ran scalar or behind overlap checks.
//
// An output that is every other element of its buffer's rows (Winograd's output pixels) is
// written by reading the two vectors' span, merging the lanes in, and writing it back.
//
// Applies to generics prepare_elementwise did not mark: static shapes, one output written in loop
// order, rows of at least 8, unit-stride innermost dimensions (or such an interleaved output),
// arithmetic and vector math only, and every input's innermost index a pure affine expression
// with the innermost loop at a stride of 0 to 4 (no other index may use that loop).
void vectorize_strided_generics(mlir::ModuleOp module);

}  // namespace kiln::cpu
