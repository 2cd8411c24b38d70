// One kernel tap of resnet18's 64-channel 3x3 convolutions as kiln computes it: weights (64, 64)
// times the shifted input over 56 rows of the padded width 58 (docs/BENCHMARKS.md, session 15).
//   build/bin/kiln run bench/models/conv_tap_product.mlir --fill random --repeat 2000 --no-cache \
//     --set KILN_NUM_THREADS=1   (then =2)
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x3248xf32>) -> tensor<64x3248xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64x3248xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<64x3248xf32>) -> tensor<64x3248xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x3248xf32>)
                     outs(%acc : tensor<64x3248xf32>) -> tensor<64x3248xf32>
  return %r : tensor<64x3248xf32>
}
