// linalg.matmul with sizes that fit no tile or vector width.
func.func @matmul(%a: tensor<37x53xf32>, %b: tensor<53x29xf32>) -> tensor<37x29xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<37x29xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<37x29xf32>) -> tensor<37x29xf32>
  %r = linalg.matmul ins(%a, %b : tensor<37x53xf32>, tensor<53x29xf32>)
                     outs(%acc : tensor<37x29xf32>) -> tensor<37x29xf32>
  return %r : tensor<37x29xf32>
}
