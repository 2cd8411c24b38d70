// y = tanh(x * a + b) + exp(-x * x) - max(x, 0), one linalg.generic per step (fused by the pipeline).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%x: tensor<7x19xf32>, %a: tensor<7x19xf32>, %b: tensor<7x19xf32>) -> tensor<7x19xf32> {
  %init = tensor.empty() : tensor<7x19xf32>
  %t = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %a, %b : tensor<7x19xf32>, tensor<7x19xf32>, tensor<7x19xf32>) outs(%init : tensor<7x19xf32>) {
    ^bb0(%xv: f32, %av: f32, %bv: f32, %o: f32):
      %m = arith.mulf %xv, %av : f32
      %s = arith.addf %m, %bv : f32
      %th = math.tanh %s : f32
      linalg.yield %th : f32
  } -> tensor<7x19xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %t : tensor<7x19xf32>, tensor<7x19xf32>) outs(%init : tensor<7x19xf32>) {
    ^bb0(%xv: f32, %tv: f32, %o: f32):
      %sq = arith.mulf %xv, %xv : f32
      %neg = arith.negf %sq : f32
      %e = math.exp %neg : f32
      %zero = arith.constant 0.0 : f32
      %relu = arith.maximumf %xv, %zero : f32
      %s1 = arith.addf %tv, %e : f32
      %s2 = arith.subf %s1, %relu : f32
      linalg.yield %s2 : f32
  } -> tensor<7x19xf32>
  return %g : tensor<7x19xf32>
}
