// A 2x3 by 3x2 product through LLVM's matrix intrinsic (column-major operands).
func.func @main() {
  %a = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : vector<6xf32>
  %b = arith.constant dense<[1.0, 0.0, 1.0, 2.0, 1.0, 0.0]> : vector<6xf32>
  %r = llvm.intr.matrix.multiply %a, %b {lhs_rows = 2 : i32, lhs_columns = 3 : i32, rhs_columns = 2 : i32}
      : (vector<6xf32>, vector<6xf32>) -> vector<4xf32>
  vector.print %r : vector<4xf32>
  return
}
