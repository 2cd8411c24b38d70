// Elementwise kernels after a matrix product (a convolution's bias, activation, residual add)
// computed on each tile of the product while it is still in cache.
#pragma once

#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
}

namespace kiln::cpu {

// On tensors, before bufferisation. Finds each elementwise linalg.generic that reads, in its own
// loop order, the result of a static 2-D linalg.matmul used nowhere else (whose output starts as a
// linalg.fill), rewrites it to update that result in place (the product becomes its init), and
// marks it for one of the returned transform scripts. Each script tiles its marked kernels with
// scf.forall and fuses the product and the fill into every tile: the tile is filled, multiplied
// and finished in the output's own buffer, one pass over memory instead of two. (The forall
// becomes a parallel loop after bufferisation: scf-forall-to-parallel.)
std::vector<std::string> prepare_epilogue_fusion(mlir::ModuleOp module);

// Drops the marks prepare_epilogue_fusion left on kernels a script did not take.
void clear_epilogue_marks(mlir::ModuleOp module);

}  // namespace kiln::cpu
