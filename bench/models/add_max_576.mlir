// An elementwise kernel big enough to be split across threads (1x576x56x56, add then max): how
// far two threads speed up a kernel whose inputs both cores already hold (docs/BENCHMARKS.md,
// session 19).
//   KILN_NUM_THREADS=1 build/bin/kiln run bench/models/add_max_576.mlir --fill ones --repeat 1000
func.func @main(%a: tensor<1x576x56x56xf32>, %b: tensor<1x576x56x56xf32>) -> tensor<1x576x56x56xf32> {
  %e = tensor.empty() : tensor<1x576x56x56xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>,
                                        affine_map<(n, c, h, w) -> (n, c, h, w)>,
                                        affine_map<(n, c, h, w) -> (n, c, h, w)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<1x576x56x56xf32>, tensor<1x576x56x56xf32>)
      outs(%e : tensor<1x576x56x56xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.maximumf %s, %x : f32
    linalg.yield %m : f32
  } -> tensor<1x576x56x56xf32>
  return %r : tensor<1x576x56x56xf32>
}
