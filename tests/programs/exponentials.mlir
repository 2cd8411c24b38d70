// Kernels that compute exponentials (kiln expands f32 exp inline from O2 on, and runs such
// kernels 16 lanes wide): rows with a partial last vector, a sigmoid-weighted unit, and a strided
// read feeding an exp.

// out = exp(x) over rows of 37: two whole vectors of 16 and a partial one.
func.func @exp_rows(%x: tensor<4x37xf32>) -> tensor<4x37xf32> {
  %e = tensor.empty() : tensor<4x37xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x37xf32>) outs(%e : tensor<4x37xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = math.exp %a : f32
    linalg.yield %y : f32
  } -> tensor<4x37xf32>
  return %r : tensor<4x37xf32>
}

// out = v * sigmoid(v), v = x + b[i]: the SiLU after a convolution's bias.
func.func @silu(%x: tensor<6x50xf32>, %b: tensor<6x1xf32>) -> tensor<6x50xf32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<6x50xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<6x50xf32>, tensor<6x1xf32>) outs(%e : tensor<6x50xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.addf %a, %c : f32
    %n = arith.negf %v : f32
    %x2 = math.exp %n : f32
    %d = arith.addf %x2, %one : f32
    %y = arith.divf %v, %d : f32
    linalg.yield %y : f32
  } -> tensor<6x50xf32>
  return %r : tensor<6x50xf32>
}

// out[i, j] = exp(x[i, 2j]): a strided read (kiln's strided vectoriser) feeding the exp.
func.func @exp_every_other(%x: tensor<3x70xf32>) -> tensor<3x35xf32> {
  %e = tensor.empty() : tensor<3x35xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j * 2)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x70xf32>) outs(%e : tensor<3x35xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = math.exp %a : f32
    linalg.yield %y : f32
  } -> tensor<3x35xf32>
  return %r : tensor<3x35xf32>
}
