// LeNet's shape in small: convolution, ReLU, max pooling, then the flatten (a collapse_shape)
// feeding a fully-connected layer, as torch-mlir exports it.
#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @main(%x: tensor<1x1x12x12xf32>, %k: tensor<4x1x3x3xf32>, %w: tensor<100x10xf32>)
    -> tensor<1x10xf32> {
  %zero = arith.constant 0.0 : f32
  %lowest = arith.constant -3.40282347E+38 : f32
  %e0 = tensor.empty() : tensor<1x4x10x10xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %k : tensor<1x1x12x12xf32>, tensor<4x1x3x3xf32>) outs(%i0 : tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  %relu = linalg.generic {indexing_maps = [#nchw, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%conv : tensor<1x4x10x10xf32>) outs(%e0 : tensor<1x4x10x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x4x10x10xf32>
  %window = tensor.empty() : tensor<2x2xf32>
  %e1 = tensor.empty() : tensor<1x4x5x5xf32>
  %i1 = linalg.fill ins(%lowest : f32) outs(%e1 : tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %pool = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%relu, %window : tensor<1x4x10x10xf32>, tensor<2x2xf32>) outs(%i1 : tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %flat = tensor.collapse_shape %pool [[0], [1, 2, 3]] : tensor<1x4x5x5xf32> into tensor<1x100xf32>
  %e2 = tensor.empty() : tensor<1x10xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  %fc = linalg.matmul ins(%flat, %w : tensor<1x100xf32>, tensor<100x10xf32>) outs(%i2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  return %fc : tensor<1x10xf32>
}
