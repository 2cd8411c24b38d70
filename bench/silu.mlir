// SiLU after a convolution bias over 96x112x112 (efficientnet_b0's first expansion), for
// docs/BENCHMARKS.md "Session 21": build/bin/kiln run bench/silu.mlir --repeat 1000 --no-cache
#id = affine_map<(d0, d1) -> (d0, d1)>
#bc = affine_map<(d0, d1) -> (d0, 0)>
func.func @main(%x: tensor<96x12544xf32>, %b: tensor<96x1xf32>) -> tensor<96x12544xf32> {
  %e = tensor.empty() : tensor<96x12544xf32>
  %r = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<96x12544xf32>, tensor<96x1xf32>) outs(%e : tensor<96x12544xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %v = arith.addf %a, %c : f32
    %n = arith.negf %v : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %s = arith.divf %v, %d : f32
    linalg.yield %s : f32
  } -> tensor<96x12544xf32>
  return %r : tensor<96x12544xf32>
}
