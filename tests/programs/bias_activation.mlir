// A convolution's epilogue as an ONNX import writes it: a per-channel bias broadcast over the
// image, then SiLU (x * sigmoid(x)). Rows of 37 leave a remainder after every vector; the bias is
// constant along the rows.
#image = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#channel = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @silu_with_bias(%x: tensor<2x3x5x37xf32>, %b: tensor<3x1x1xf32>) -> tensor<2x3x5x37xf32> {
  %init = tensor.empty() : tensor<2x3x5x37xf32>
  %y = linalg.generic {indexing_maps = [#image, #channel, #image],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %b : tensor<2x3x5x37xf32>, tensor<3x1x1xf32>) outs(%init : tensor<2x3x5x37xf32>) {
    ^bb0(%xv: f32, %bv: f32, %o: f32):
      %s = arith.addf %xv, %bv : f32
      %n = arith.negf %s : f32
      %e = math.exp %n : f32
      %one = arith.constant 1.0 : f32
      %d = arith.addf %e, %one : f32
      %sig = arith.divf %one, %d : f32
      %r = arith.mulf %s, %sig : f32
      linalg.yield %r : f32
  } -> tensor<2x3x5x37xf32>
  return %y : tensor<2x3x5x37xf32>
}
