// exp over 6x197x197 floats: the loop libmvec vectorises (docs/BENCHMARKS.md).
module @exp_kernel {
  func.func @main(%a: tensor<6x197x197xf32>) -> tensor<6x197x197xf32> {
    %e = tensor.empty() : tensor<6x197x197xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<6x197x197xf32>) outs(%e : tensor<6x197x197xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = math.exp %x : f32
      linalg.yield %y : f32
    } -> tensor<6x197x197xf32>
    return %r : tensor<6x197x197xf32>
  }
}
