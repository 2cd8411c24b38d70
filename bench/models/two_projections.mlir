module @two_projections {
  func.func @main(%x: tensor<197x384xf32>, %wq: tensor<384x384xf32>, %wk: tensor<384x384xf32>) -> (tensor<197x384xf32>, tensor<197x384xf32>) {
    %zero = arith.constant 0.0 : f32
    %eq = tensor.empty() : tensor<197x384xf32>
    %fq = linalg.fill ins(%zero : f32) outs(%eq : tensor<197x384xf32>) -> tensor<197x384xf32>
    %q = linalg.matmul ins(%x, %wq : tensor<197x384xf32>, tensor<384x384xf32>) outs(%fq : tensor<197x384xf32>) -> tensor<197x384xf32>
    %ek = tensor.empty() : tensor<197x384xf32>
    %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<197x384xf32>) -> tensor<197x384xf32>
    %k = linalg.matmul ins(%x, %wk : tensor<197x384xf32>, tensor<384x384xf32>) outs(%fk : tensor<197x384xf32>) -> tensor<197x384xf32>
    return %q, %k : tensor<197x384xf32>, tensor<197x384xf32>
  }
}
