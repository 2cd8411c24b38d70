// Scalar arguments next to a tensor: y = alpha * x + n.
#id = affine_map<(d0) -> (d0)>
func.func @axpn(%x: tensor<5xf32>, %alpha: f32, %n: index) -> tensor<5xf32> {
  %ni = arith.index_cast %n : index to i64
  %nf = arith.sitofp %ni : i64 to f32
  %init = tensor.empty() : tensor<5xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<5xf32>) outs(%init : tensor<5xf32>) {
    ^bb0(%v: f32, %o: f32):
      %m = arith.mulf %v, %alpha : f32
      %s = arith.addf %m, %nf : f32
      linalg.yield %s : f32
  } -> tensor<5xf32>
  return %y : tensor<5xf32>
}
