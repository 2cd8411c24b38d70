// A small perceptron with odd sizes for the PGLE tests: two contractions, a fused bias+ReLU and
// the fills that initialise the accumulators.
module @pgle_mlp {
  func.func @main(%x: tensor<37x53xf32>, %w1: tensor<53x70xf32>, %b1: tensor<37x70xf32>,
                  %w2: tensor<70x29xf32>) -> tensor<37x29xf32> {
    %zero = arith.constant 0.0 : f32
    %e1 = tensor.empty() : tensor<37x70xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<37x70xf32>) -> tensor<37x70xf32>
    %h = linalg.matmul ins(%x, %w1 : tensor<37x53xf32>, tensor<53x70xf32>)
                       outs(%f1 : tensor<37x70xf32>) -> tensor<37x70xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                          affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%h, %b1 : tensor<37x70xf32>, tensor<37x70xf32>) outs(%e1 : tensor<37x70xf32>) {
    ^bb0(%v: f32, %b: f32, %o: f32):
      %s = arith.addf %v, %b : f32
      %m = arith.maximumf %s, %zero : f32
      linalg.yield %m : f32
    } -> tensor<37x70xf32>
    %e2 = tensor.empty() : tensor<37x29xf32>
    %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<37x29xf32>) -> tensor<37x29xf32>
    %o = linalg.matmul ins(%r, %w2 : tensor<37x70xf32>, tensor<70x29xf32>)
                       outs(%f2 : tensor<37x29xf32>) -> tensor<37x29xf32>
    return %o : tensor<37x29xf32>
  }
}
