// A product whose result is reshaped afterwards (as a model's convolution output is): the buffer
// has a view, and the accumulators still stay in registers. Sizes leave remainders in every tile
// and take more than one reduction block.
func.func @matmul_reshaped(%a: tensor<70x300xf32>, %b: tensor<300x150xf32>) -> tensor<7x10x150xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<70x150xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<70x150xf32>) -> tensor<70x150xf32>
  %r = linalg.matmul ins(%a, %b : tensor<70x300xf32>, tensor<300x150xf32>)
                     outs(%acc : tensor<70x150xf32>) -> tensor<70x150xf32>
  %e = tensor.expand_shape %r [[0, 1], [2]] output_shape [7, 10, 150]
      : tensor<70x150xf32> into tensor<7x10x150xf32>
  return %e : tensor<7x10x150xf32>
}

// A product with one reduction block (a pointwise convolution's): kiln drops the zero fill and
// starts each tile from zero in registers.
func.func @short_reduction(%a: tensor<70x20xf32>, %b: tensor<20x150xf32>) -> tensor<7x10x150xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<70x150xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<70x150xf32>) -> tensor<70x150xf32>
  %r = linalg.matmul ins(%a, %b : tensor<70x20xf32>, tensor<20x150xf32>)
                     outs(%acc : tensor<70x150xf32>) -> tensor<70x150xf32>
  %e = tensor.expand_shape %r [[0, 1], [2]] output_shape [7, 10, 150]
      : tensor<70x150xf32> into tensor<7x10x150xf32>
  return %e : tensor<7x10x150xf32>
}
