// Elementwise kernels whose inputs are read with a stride or at an offset along the innermost
// loop (kiln's strided vectoriser): whole vectors, a partial last vector, spans that reach the
// end of their buffer, broadcasts and integer elements.

// out[i, j] = x[i, 2j + 1]: 37 columns, two whole vectors of 16 and a partial one.
func.func @every_other(%x: tensor<5x75xf32>) -> tensor<5x37xf32> {
  %e = tensor.empty() : tensor<5x37xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j * 2 + 1)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<5x75xf32>) outs(%e : tensor<5x37xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<5x37xf32>
  return %r : tensor<5x37xf32>
}

// out[j] = x[2j] for 16 columns of a 31-long row: the last whole vector's span runs past the row.
func.func @every_other_to_the_end(%x: tensor<31xf32>) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(j) -> (j * 2)>, affine_map<(j) -> (j)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<31xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// out[i, j] = x[i, 3j] * 2 + b[i] - x[i, 4j + 3] + c[i, j + 1]: strides 3 and 4, a per-row
// broadcast, an offset unit-stride read and a constant, over 33 columns.
func.func @mixed_strides(%x: tensor<4x140xf32>, %b: tensor<4xf32>, %c: tensor<4x34xf32>)
    -> tensor<4x33xf32> {
  %e = tensor.empty() : tensor<4x33xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j * 3)>,
                                        affine_map<(i, j) -> (i)>,
                                        affine_map<(i, j) -> (i, j * 4 + 3)>,
                                        affine_map<(i, j) -> (i, j + 1)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b, %x, %c : tensor<4x140xf32>, tensor<4xf32>, tensor<4x140xf32>, tensor<4x34xf32>)
      outs(%e : tensor<4x33xf32>) {
  ^bb0(%a: f32, %bias: f32, %d: f32, %s: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %a, %two : f32
    %p = arith.addf %m, %bias : f32
    %q = arith.subf %p, %d : f32
    %t = arith.addf %q, %s : f32
    linalg.yield %t : f32
  } -> tensor<4x33xf32>
  return %r : tensor<4x33xf32>
}

// A 3-wide stride-2 window's maximum along rows (a pool's taps): out[i, j] is the largest of
// x[i, 2j], x[i, 2j + 1], x[i, 2j + 2], NaN when any of them is.
func.func @window_max(%x: tensor<3x41xf32>) -> tensor<3x20xf32> {
  %e = tensor.empty() : tensor<3x20xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j * 2)>,
                                        affine_map<(i, j) -> (i, j * 2 + 1)>,
                                        affine_map<(i, j) -> (i, j * 2 + 2)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %x, %x : tensor<3x41xf32>, tensor<3x41xf32>, tensor<3x41xf32>)
      outs(%e : tensor<3x20xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %ab = arith.maximumf %a, %b : f32
    %abc = arith.maximumf %ab, %c : f32
    linalg.yield %abc : f32
  } -> tensor<3x20xf32>
  return %r : tensor<3x20xf32>
}

// Integers: out[i, j] = x[2i, 2j + 1] + 7.
func.func @every_other_i32(%x: tensor<6x50xi32>) -> tensor<3x24xi32> {
  %e = tensor.empty() : tensor<3x24xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i * 2, j * 2 + 1)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<6x50xi32>) outs(%e : tensor<3x24xi32>) {
  ^bb0(%a: i32, %o: i32):
    %seven = arith.constant 7 : i32
    %s = arith.addi %a, %seven : i32
    linalg.yield %s : i32
  } -> tensor<3x24xi32>
  return %r : tensor<3x24xi32>
}

// Outputs written every other column: out[i, 2j] = x[i, j] + 1 and out[i, 2j + 1] = y[i, j] * 2,
// two kernels over 37-wide rows (a whole vector and a partial one each).
func.func @interleaved_columns(%x: tensor<3x19xf32>, %y: tensor<3x18xf32>) -> tensor<3x37xf32> {
  %e = tensor.empty() : tensor<3x37xf32>
  %ee = tensor.empty() : tensor<3x19xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x19xf32>) outs(%ee : tensor<3x19xf32>) {
  ^bb0(%v: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %s = arith.addf %v, %one : f32
    linalg.yield %s : f32
  } -> tensor<3x19xf32>
  %eo = tensor.empty() : tensor<3x18xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<3x18xf32>) outs(%eo : tensor<3x18xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %s = arith.mulf %v, %two : f32
    linalg.yield %s : f32
  } -> tensor<3x18xf32>
  %even = tensor.insert_slice %a into %e[0, 0] [3, 19] [1, 2] : tensor<3x19xf32> into tensor<3x37xf32>
  %both = tensor.insert_slice %b into %even[0, 1] [3, 18] [1, 2] : tensor<3x18xf32> into tensor<3x37xf32>
  return %both : tensor<3x37xf32>
}

// Integer division after a stride-2 read: out[i, j] = x[i, 2j] / d[i, j] over 37 columns (the
// partial last vector must not divide lanes past the row).
func.func @every_other_divided(%x: tensor<2x74xi32>, %d: tensor<2x37xi32>) -> tensor<2x37xi32> {
  %e = tensor.empty() : tensor<2x37xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j * 2)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %d : tensor<2x74xi32>, tensor<2x37xi32>) outs(%e : tensor<2x37xi32>) {
  ^bb0(%a: i32, %b: i32, %o: i32):
    %q = arith.divsi %a, %b : i32
    linalg.yield %q : i32
  } -> tensor<2x37xi32>
  return %r : tensor<2x37xi32>
}

// Integer division elementwise over 37-wide rows (linalg's vectoriser's partial vectors).
func.func @divided(%x: tensor<2x37xi32>, %d: tensor<2x37xi32>) -> tensor<2x37xi32> {
  %e = tensor.empty() : tensor<2x37xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %d : tensor<2x37xi32>, tensor<2x37xi32>) outs(%e : tensor<2x37xi32>) {
  ^bb0(%a: i32, %b: i32, %o: i32):
    %q = arith.remsi %a, %b : i32
    linalg.yield %q : i32
  } -> tensor<2x37xi32>
  return %r : tensor<2x37xi32>
}
