module @serve_mlp {
  func.func @main(%x: tensor<5x784xf32>, %w0: tensor<784x1000xf32>, %w1: tensor<1000x500xf32>, %w2: tensor<500x10xf32>) -> tensor<5x10xf32> {
    %zero = arith.constant 0.0 : f32
    %e0 = tensor.empty() : tensor<5x1000xf32>
    %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<5x1000xf32>) -> tensor<5x1000xf32>
    %h0 = linalg.matmul ins(%x, %w0 : tensor<5x784xf32>, tensor<784x1000xf32>) outs(%f0 : tensor<5x1000xf32>) -> tensor<5x1000xf32>
    %e1 = tensor.empty() : tensor<5x500xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<5x500xf32>) -> tensor<5x500xf32>
    %h1 = linalg.matmul ins(%h0, %w1 : tensor<5x1000xf32>, tensor<1000x500xf32>) outs(%f1 : tensor<5x500xf32>) -> tensor<5x500xf32>
    %e2 = tensor.empty() : tensor<5x10xf32>
    %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<5x10xf32>) -> tensor<5x10xf32>
    %h2 = linalg.matmul ins(%h1, %w2 : tensor<5x500xf32>, tensor<500x10xf32>) outs(%f2 : tensor<5x10xf32>) -> tensor<5x10xf32>
    return %h2 : tensor<5x10xf32>
  }
}
