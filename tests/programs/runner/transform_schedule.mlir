// A program that carries its own transform schedule: the matmul is tiled 2x2 (then unrolled by
// nothing else), as `mlir-opt -transform-interpreter` would apply it. The result is the same.
module attributes {transform.with_named_sequence} {
  func.func @main() {
    %a = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xf32>
    %b = arith.constant dense<[[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]> : tensor<3x3xf32>
    %zero = arith.constant 0.0 : f32
    %init = tensor.empty() : tensor<3x3xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<3x3xf32>) -> tensor<3x3xf32>
    %c = linalg.matmul ins(%a, %b : tensor<3x3xf32>, tensor<3x3xf32>)
                       outs(%acc : tensor<3x3xf32>) -> tensor<3x3xf32>
    %unranked = tensor.cast %c : tensor<3x3xf32> to tensor<*xf32>
    call @printMemrefF32(%unranked) : (tensor<*xf32>) -> ()
    return
  }
  func.func private @printMemrefF32(%ptr : tensor<*xf32>) attributes { llvm.emit_c_interface }

  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %matmul = transform.structured.match ops{["linalg.matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loops:2 = transform.structured.tile_using_for %matmul tile_sizes [2, 2]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}
