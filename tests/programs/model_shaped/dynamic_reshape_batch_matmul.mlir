// The same with a dynamic row count: the view stays an expand_shape, the tiling step reaches its
// rewrite bound, and the contraction is compiled as loops instead of hanging.
func.func @main(%a: tensor<?x8xf32>, %b: tensor<1x8x4xf32>) -> tensor<1x?x4xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x8xf32>
  %r = tensor.expand_shape %a [[0, 1], [2]] output_shape [1, %n, 8] : tensor<?x8xf32> into tensor<1x?x8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<1x?x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %m = linalg.batch_matmul ins(%r, %b : tensor<1x?x8xf32>, tensor<1x8x4xf32>) outs(%f : tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  return %m : tensor<1x?x4xf32>
}
