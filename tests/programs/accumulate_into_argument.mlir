// Writes its result into its third argument (outs(%acc)), as IREE's matvec tests do: the caller's
// buffer must stay as it was, so every run returns a*b + acc.
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %acc: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%acc : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
