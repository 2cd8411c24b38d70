// Six products in a chain, each result (64 x 16384 floats, 4 MiB) read only by the next: with
// buffers freed after their last use, no more than two intermediates are ever alive.
func.func @chain(%w: tensor<64x64xf32>, %x: tensor<64x16384xf32>) -> tensor<64x16384xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x16384xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p1 = linalg.matmul ins(%w, %x : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f1 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e2 = tensor.empty() : tensor<64x16384xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p2 = linalg.matmul ins(%w, %p1 : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f2 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e3 = tensor.empty() : tensor<64x16384xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p3 = linalg.matmul ins(%w, %p2 : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f3 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e4 = tensor.empty() : tensor<64x16384xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p4 = linalg.matmul ins(%w, %p3 : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f4 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e5 = tensor.empty() : tensor<64x16384xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p5 = linalg.matmul ins(%w, %p4 : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f5 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e6 = tensor.empty() : tensor<64x16384xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %p6 = linalg.matmul ins(%w, %p5 : tensor<64x64xf32>, tensor<64x16384xf32>) outs(%f6 : tensor<64x16384xf32>) -> tensor<64x16384xf32>
  return %p6 : tensor<64x16384xf32>
}
