// One matmul whose sizes fit no tile: 200x513 · 513x1023 (docs/BENCHMARKS.md, peeled tiles).
module @odd_matmul {
  func.func @main(%a: tensor<200x513xf32>, %b: tensor<513x1023xf32>) -> tensor<200x1023xf32> {
    %z = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<200x1023xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<200x1023xf32>) -> tensor<200x1023xf32>
    %m = linalg.matmul ins(%a, %b : tensor<200x513xf32>, tensor<513x1023xf32>) outs(%f : tensor<200x1023xf32>) -> tensor<200x1023xf32>
    return %m : tensor<200x1023xf32>
  }
}
