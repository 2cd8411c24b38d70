// A two-layer perceptron in TOSA: 8 samples × 64 features → 128 hidden (ReLU) → 10 classes.
module @mlp {
  func.func @main(%x: tensor<1x8x64xf32>, %w1: tensor<1x64x128xf32>, %b1: tensor<1x1x128xf32>,
                  %w2: tensor<1x128x10xf32>, %b2: tensor<1x1x10xf32>) -> tensor<1x8x10xf32> {
    %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
    %h = tosa.matmul %x, %w1, %zp, %zp : (tensor<1x8x64xf32>, tensor<1x64x128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x128xf32>
    %hb = tosa.add %h, %b1 : (tensor<1x8x128xf32>, tensor<1x1x128xf32>) -> tensor<1x8x128xf32>
    %r = tosa.clamp %hb {min_val = 0.0 : f32, max_val = 3.4028235e+38 : f32, nan_mode = "IGNORE"} : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
    %o = tosa.matmul %r, %w2, %zp, %zp : (tensor<1x8x128xf32>, tensor<1x128x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x10xf32>
    %ob = tosa.add %o, %b2 : (tensor<1x8x10xf32>, tensor<1x1x10xf32>) -> tensor<1x8x10xf32>
    return %ob : tensor<1x8x10xf32>
  }
}
