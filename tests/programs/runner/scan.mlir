// vector.scan, inclusive and exclusive, along either dimension, over floats and integers: no
// lowering of convert-vector-to-llvm takes it (mlir-opt needs -test-vector-scan-lowering).
func.func @main() {
  %rows = arith.constant dense<[[1.5, -2.0, 4.0], [0.5, 3.0, -1.0]]> : vector<2x3xf32>
  %seed_cols = arith.constant dense<[10.0, 20.0, 30.0]> : vector<3xf32>
  %seed_rows = arith.constant dense<[-1.0, 1.0]> : vector<2xf32>
  %down:2 = vector.scan <add>, %rows, %seed_cols {inclusive = true, reduction_dim = 0}
      : vector<2x3xf32>, vector<3xf32>
  %across:2 = vector.scan <maximumf>, %rows, %seed_rows {inclusive = false, reduction_dim = 1}
      : vector<2x3xf32>, vector<2xf32>
  vector.print %down#0 : vector<2x3xf32>
  vector.print %down#1 : vector<3xf32>
  vector.print %across#0 : vector<2x3xf32>
  vector.print %across#1 : vector<2xf32>
  %ints = arith.constant dense<[3, -2, 5, 7]> : vector<4xi32>
  %one = arith.constant dense<1> : vector<i32>
  %products:2 = vector.scan <mul>, %ints, %one {inclusive = false, reduction_dim = 0}
      : vector<4xi32>, vector<i32>
  %sums:2 = vector.scan <add>, %ints, %one {inclusive = true, reduction_dim = 0}
      : vector<4xi32>, vector<i32>
  vector.print %products#0 : vector<4xi32>
  vector.print %products#1 : vector<i32>
  vector.print %sums#0 : vector<4xi32>
  vector.print %sums#1 : vector<i32>
  return
}
