// NHWC × HWCF convolution, 3×3 kernel, stride 1, no padding.
func.func @conv(%x: tensor<2x10x9x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<2x8x7x8xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<2x8x7x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<2x8x7x8xf32>) -> tensor<2x8x7x8xf32>
  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<2x10x9x3xf32>, tensor<3x3x3x8xf32>) outs(%acc : tensor<2x8x7x8xf32>) -> tensor<2x8x7x8xf32>
  return %r : tensor<2x8x7x8xf32>
}
