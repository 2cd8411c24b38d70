// Elementwise kernels after a matrix product, as a convolution's bias, activation and residual
// add are written: kiln computes them on each tile of the product (kiln-fuse-epilogues).
// 96 rows tile by 48; 200 columns are one tile; 605 columns tile by 121 (no multiple of 8
// divides them); 100 rows have no tile size, so that product stays unfused.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>

func.func @bias_relu(%a: tensor<96x24xf32>, %b: tensor<24x200xf32>, %bias: tensor<96x1xf32>)
    -> tensor<96x200xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<96x200xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<96x200xf32>) -> tensor<96x200xf32>
  %p = linalg.matmul ins(%a, %b : tensor<96x24xf32>, tensor<24x200xf32>)
                     outs(%fill : tensor<96x200xf32>) -> tensor<96x200xf32>
  %init = tensor.empty() : tensor<96x200xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<96x200xf32>, tensor<96x1xf32>) outs(%init : tensor<96x200xf32>) {
    ^bb0(%x: f32, %c: f32, %o: f32):
      %s = arith.addf %x, %c : f32
      %r = arith.maximumf %s, %zero : f32
      linalg.yield %r : f32
  } -> tensor<96x200xf32>
  return %y : tensor<96x200xf32>
}

// The product as the kernel's second input, a residual added, a long reduction (K = 300: more
// than one reduction block).
func.func @residual(%a: tensor<40x300xf32>, %b: tensor<300x605xf32>, %r: tensor<40x605xf32>,
                    %bias: tensor<40x1xf32>) -> tensor<40x605xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<40x605xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<40x605xf32>) -> tensor<40x605xf32>
  %p = linalg.matmul ins(%a, %b : tensor<40x300xf32>, tensor<300x605xf32>)
                     outs(%fill : tensor<40x605xf32>) -> tensor<40x605xf32>
  %init = tensor.empty() : tensor<40x605xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #row, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %p, %bias : tensor<40x605xf32>, tensor<40x605xf32>, tensor<40x1xf32>)
      outs(%init : tensor<40x605xf32>) {
    ^bb0(%rv: f32, %x: f32, %c: f32, %o: f32):
      %s = arith.addf %x, %c : f32
      %t = arith.addf %s, %rv : f32
      linalg.yield %t : f32
  } -> tensor<40x605xf32>
  return %y : tensor<40x605xf32>
}

// SiLU reads the product twice; 100 rows: no tile size divides them, the kernel stays apart.
func.func @silu(%a: tensor<100x24xf32>, %b: tensor<24x64xf32>, %bias: tensor<100x1xf32>)
    -> tensor<100x64xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %empty = tensor.empty() : tensor<100x64xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<100x64xf32>) -> tensor<100x64xf32>
  %p = linalg.matmul ins(%a, %b : tensor<100x24xf32>, tensor<24x64xf32>)
                     outs(%fill : tensor<100x64xf32>) -> tensor<100x64xf32>
  %init = tensor.empty() : tensor<100x64xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<100x64xf32>, tensor<100x1xf32>) outs(%init : tensor<100x64xf32>) {
    ^bb0(%x: f32, %c: f32, %o: f32):
      %s = arith.addf %x, %c : f32
      %n = arith.negf %s : f32
      %e = math.exp %n : f32
      %d = arith.addf %e, %one : f32
      %r = arith.divf %s, %d : f32
      linalg.yield %r : f32
  } -> tensor<100x64xf32>
  return %y : tensor<100x64xf32>
}
