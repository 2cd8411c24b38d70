// LLVM's matrix intrinsics on flattened 2x3 and 3x2 matrices: what they compute depends on the
// layout they assume (mlir-runner -matrix-default-layout, kiln KILN_MATRIX_DEFAULT_LAYOUT).
func.func @main() {
  %a = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : vector<6xf64>
  %b = arith.constant dense<[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]> : vector<6xf64>
  %t = llvm.intr.matrix.transpose %a {rows = 2 : i32, columns = 3 : i32}
      : vector<6xf64> into vector<6xf64>
  vector.print %t : vector<6xf64>
  %p = llvm.intr.matrix.multiply %a, %b
      {lhs_rows = 2 : i32, lhs_columns = 3 : i32, rhs_columns = 2 : i32}
      : (vector<6xf64>, vector<6xf64>) -> vector<4xf64>
  vector.print %p : vector<4xf64>
  return
}
