// A reshaped argument feeding a batched matmul: before kiln rewrote such views, the O2/O3
// tiling step never finished on it (memref alias folding and dead-code removal undid each other).
func.func @main(%a: tensor<16x8xf32>, %b: tensor<1x8x4xf32>) -> tensor<1x16x4xf32> {
  %r = tensor.expand_shape %a [[0, 1], [2]] output_shape [1, 16, 8] : tensor<16x8xf32> into tensor<1x16x8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x16x4xf32>) -> tensor<1x16x4xf32>
  %m = linalg.batch_matmul ins(%r, %b : tensor<1x16x8xf32>, tensor<1x8x4xf32>) outs(%f : tensor<1x16x4xf32>) -> tensor<1x16x4xf32>
  return %m : tensor<1x16x4xf32>
}
