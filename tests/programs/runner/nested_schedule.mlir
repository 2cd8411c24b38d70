// The payload's functions and, beside them, a module holding the transform schedule (the layout
// of many of MLIR's own integration tests): `mlir-opt -transform-interpreter` finds
// @__transform_main in the nested module and applies it to the whole file.
func.func @main() {
  %a = arith.constant dense<[[1, 2, 3], [4, 5, 6], [7, 8, 9]]> : tensor<3x3xi32>
  %b = arith.constant dense<[[1, 0, 2], [0, 1, 0], [1, 1, 1]]> : tensor<3x3xi32>
  %zero = arith.constant 0 : i32
  %init = tensor.empty() : tensor<3x3xi32>
  %acc = linalg.fill ins(%zero : i32) outs(%init : tensor<3x3xi32>) -> tensor<3x3xi32>
  %c = linalg.matmul ins(%a, %b : tensor<3x3xi32>, tensor<3x3xi32>)
                     outs(%acc : tensor<3x3xi32>) -> tensor<3x3xi32>
  %unranked = tensor.cast %c : tensor<3x3xi32> to tensor<*xi32>
  call @printMemrefI32(%unranked) : (tensor<*xi32>) -> ()
  return
}
func.func private @printMemrefI32(%ptr : tensor<*xi32>)

module @schedule attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %matmul = transform.collect_matching @match_matmul in %root
        : (!transform.any_op) -> (!transform.any_op)
    %tiled, %loops:2 = transform.structured.tile_using_for %matmul tile_sizes [1, 2]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
  transform.named_sequence @match_matmul(%op: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    transform.match.operation_name %op ["linalg.matmul"] : !transform.any_op
    transform.yield %op : !transform.any_op
  }
}
