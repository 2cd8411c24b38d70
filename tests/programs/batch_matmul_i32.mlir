// Integer batch matmul (exact results) and an i1 comparison result.
func.func @bmm(%a: tensor<3x5x7xi32>, %b: tensor<3x7x4xi32>) -> (tensor<3x5x4xi32>, tensor<3x5x4xi1>) {
  %zero = arith.constant 0 : i32
  %init = tensor.empty() : tensor<3x5x4xi32>
  %acc = linalg.fill ins(%zero : i32) outs(%init : tensor<3x5x4xi32>) -> tensor<3x5x4xi32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<3x5x7xi32>, tensor<3x7x4xi32>) outs(%acc : tensor<3x5x4xi32>) -> tensor<3x5x4xi32>
  %binit = tensor.empty() : tensor<3x5x4xi1>
  %pos = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r : tensor<3x5x4xi32>) outs(%binit : tensor<3x5x4xi1>) {
    ^bb0(%v: i32, %o: i1):
      %c = arith.cmpi sgt, %v, %zero : i32
      linalg.yield %c : i1
  } -> tensor<3x5x4xi1>
  return %r, %pos : tensor<3x5x4xi32>, tensor<3x5x4xi1>
}
