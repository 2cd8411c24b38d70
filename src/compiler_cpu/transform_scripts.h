// Transform-dialect scripts kiln applies (the contraction script, which varies with the PGLE
// candidates, is generated in pgle_codegen.cc).
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

// At every level, before bufferisation (which has no rule for them): linalg.pack and
// linalg.unpack become pad + expand_shape + transpose, and empty + transpose + collapse_shape +
// extract_slice.
inline constexpr const char* kLowerPackUnpackScript = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %packs = transform.structured.match ops{["linalg.pack"]} in %root
        : (!transform.any_op) -> !transform.op<"linalg.pack">
    transform.structured.lower_pack %packs : (!transform.op<"linalg.pack">)
        -> (!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">,
            !transform.op<"linalg.transpose">)
    %unpacks = transform.structured.match ops{["linalg.unpack"]} in %root
        : (!transform.any_op) -> !transform.op<"linalg.unpack">
    transform.structured.lower_unpack %unpacks : (!transform.op<"linalg.unpack">)
        -> (!transform.op<"tensor.empty">, !transform.op<"linalg.transpose">,
            !transform.op<"tensor.collapse_shape">, !transform.op<"tensor.extract_slice">)
    transform.yield
  }
}
)mlir";

// vector.scan as extracts, elementwise ops and inserts along the scanned dimension.
inline constexpr const char* kLowerScanScript = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_scan
    } : !transform.any_op
    transform.yield
  }
}
)mlir";

}  // namespace kiln::cpu
