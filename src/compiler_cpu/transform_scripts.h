// Transform-dialect scripts kiln applies (after bufferisation) from effort level O2 up.
#pragma once

namespace kiln::cpu {

// 2-D convolutions (on tensors, before bufferisation: decomposition needs tensor semantics): tile
// batch, output row and kernel row to 1 so each tile is a 1-D convolution, and vectorise it into
// contractions over the channels. Shapes must be static; otherwise the module stays as it was.
inline constexpr const char* kVectorizeConvolutionsScript = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %conv = transform.structured.match ops{["linalg.conv_2d_nhwc_hwcf"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loops:3 = transform.structured.tile_using_for %conv tile_sizes [1, 1, 0, 0, 1, 0, 0]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %conv1d = transform.structured.decompose %tiled : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %conv1d : !transform.any_op
    %funcs = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)mlir";

// Contractions: tile for the caches (64×128×128), then to an 8×32 register tile with a unit
// reduction step, and vectorise that tile only (masked where sizes are odd). The reduction becomes
// a contraction lowered to outer products (FMAs), and the accumulator's read/write is hoisted out
// of the reduction loop so it stays in registers.
inline constexpr const char* kTileAndVectorizeScript = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %mm_l2, %mm_outer:3 = transform.structured.tile_using_for %mm tile_sizes [64, 128, 128]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %mm_reg, %mm_inner:3 = transform.structured.tile_using_for %mm_l2 tile_sizes [8, 32, 1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.structured.vectorize %mm_reg vector_sizes [8, 32, 1] : !transform.any_op

    %bmm = transform.structured.match ops{["linalg.batch_matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %bmm_l2, %bmm_outer:4 = transform.structured.tile_using_for %bmm tile_sizes [1, 64, 128, 128]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %bmm_reg, %bmm_inner:4 = transform.structured.tile_using_for %bmm_l2 tile_sizes [1, 8, 32, 1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.structured.vectorize %bmm_reg vector_sizes [1, 8, 32, 1] : !transform.any_op

    %funcs = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_masked_transfers
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
    } : !transform.any_op
    // Hoisting needs the accumulator addressed on its base buffer, not through a subview, and the
    // read and write indices to be the same SSA values.
    transform.apply_patterns to %funcs {
      transform.apply_patterns.canonicalization
      transform.apply_patterns.memref.fold_memref_alias_ops
    } : !transform.any_op
    transform.apply_cse to %funcs : !transform.any_op
    %hoisted = transform.structured.hoist_redundant_vector_transfers %funcs
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %hoisted {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)mlir";

}  // namespace kiln::cpu
