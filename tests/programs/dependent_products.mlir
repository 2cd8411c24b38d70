// Eight small products in a chain: y0 = x w, y_p = y_(p-1) w. Each reads what the one before
// wrote, so none may run beside another (parallel_loops.cc, share_kernel_runs).
module {
  func.func @chain(%x: tensor<48x48xf32>, %w: tensor<48x48xf32>) -> tensor<48x48xf32> {
    %zero = arith.constant 0.0 : f32
    %e0 = tensor.empty() : tensor<48x48xf32>
    %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y0 = linalg.matmul ins(%x, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z0 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e1 = tensor.empty() : tensor<48x48xf32>
    %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y1 = linalg.matmul ins(%y0, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z1 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e2 = tensor.empty() : tensor<48x48xf32>
    %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y2 = linalg.matmul ins(%y1, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z2 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e3 = tensor.empty() : tensor<48x48xf32>
    %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y3 = linalg.matmul ins(%y2, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z3 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e4 = tensor.empty() : tensor<48x48xf32>
    %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y4 = linalg.matmul ins(%y3, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z4 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e5 = tensor.empty() : tensor<48x48xf32>
    %z5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y5 = linalg.matmul ins(%y4, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z5 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e6 = tensor.empty() : tensor<48x48xf32>
    %z6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y6 = linalg.matmul ins(%y5, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z6 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %e7 = tensor.empty() : tensor<48x48xf32>
    %z7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<48x48xf32>) -> tensor<48x48xf32>
    %y7 = linalg.matmul ins(%y6, %w : tensor<48x48xf32>, tensor<48x48xf32>) outs(%z7 : tensor<48x48xf32>) -> tensor<48x48xf32>
    return %y7 : tensor<48x48xf32>
  }
}
